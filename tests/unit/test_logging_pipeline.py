"""M4/L-logging: stdlib records (uvicorn, httpx, SDKs) take the structlog pipeline: one JSON line
each, secrets redacted, and no query string of any URL or path."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from orchestrator.logs import configure_logging
from orchestrator.redaction import register_secret

SECRET = "sk-live-0123456789abcdefghijklmnop"


NAMES = ("uvicorn.error", "httpx", "sqlalchemy.engine")


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    configure_logging("DEBUG", stream=buf, json=True)
    levels = {name: logging.getLogger(name).level for name in NAMES}
    for name in NAMES:  # other tests (and uvicorn's own config) set these loggers' levels
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield buf
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        configure_logging("WARNING")


def test_stdlib_records_are_redacted_json_without_query_strings(lines: io.StringIO) -> None:
    register_secret(SECRET)
    logging.getLogger("uvicorn.error").info(
        '%s - "WebSocket %s" [accepted]', "127.0.0.1:5000", "/v1/sessions/s1/ws?ticket=wst_abc&after_seq=3"
    )
    logging.getLogger("httpx").debug("HTTP Request: POST https://api.example/v1?key=abc %s", SECRET)
    try:
        raise ValueError(f"upstream said {SECRET}")
    except ValueError:
        logging.getLogger("sqlalchemy.engine").exception("failed")
    out = lines.getvalue()
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["logger"] for r in records] == ["uvicorn.error", "httpx", "sqlalchemy.engine"]
    assert records[0]["event"] == '127.0.0.1:5000 - "WebSocket /v1/sessions/s1/ws?…" [accepted]'
    assert records[0]["level"] == "info" and "timestamp" in records[0]
    assert "https://api.example/v1?…" in records[1]["event"]
    assert "ValueError" in records[2]["exception"]
    assert SECRET not in out and "wst_abc" not in out and "key=abc" not in out
