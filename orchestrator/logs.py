"""structlog set-up: JSON lines when stderr is not a TTY, console rendering when it is.

Every event dict passes through the redaction processor last-but-one, so no processor or
caller can leak a registered secret into a log line. Bind `session_id`, `turn_id` and `sandbox`
with `structlog.contextvars.bind_contextvars` and they appear on every line of that task.

Records of stdlib loggers (uvicorn, SQLAlchemy, httpx, the model SDKs) go through the same
processors and the same redaction (one pipeline, one format), and the query string of any URL in
them is cut: uvicorn logs websocket paths whole, and browsers put tokens in query strings.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

from orchestrator.redaction import redact_value


def redact_processor(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor masking secrets in every value of the event dict."""
    redacted: MutableMapping[str, Any] = redact_value(dict(event_dict))
    return redacted


_QUERY = re.compile(r"((?:https?|wss?)://[^\s\"'?]+|/[^\s\"'?]*)\?[^\s\"']+")


def strip_query_strings(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Replace the query string of every URL or path in the message with `?…`."""
    event = event_dict.get("event")
    if isinstance(event, str) and "?" in event:
        event_dict["event"] = _QUERY.sub(r"\1?…", event)
    return event_dict


def configure_logging(level: str = "INFO", *, stream: TextIO | None = None, json: bool | None = None) -> None:
    """Configure structlog and the stdlib root logger. Idempotent."""
    out = stream or sys.stderr
    as_json = (not out.isatty()) if json is None else json
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    renderer: Any = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            stamp,
            structlog.processors.format_exc_info,
            redact_processor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.stdlib.add_logger_name,
                stamp,
                strip_query_strings,
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                redact_processor,
                renderer,
            ],
        )
    )
    logging.basicConfig(level=numeric, handlers=[handler], force=True)
    for name in (
        "uvicorn",
        "uvicorn.error",
        "uvicorn.access",
    ):  # uvicorn's own config stops them at "uvicorn"
        server_logger = logging.getLogger(name)
        server_logger.handlers.clear()
        server_logger.propagate = True
