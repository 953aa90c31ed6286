"""structlog set-up: JSON lines when stderr is not a TTY, console rendering when it is.

Every event dict passes through the redaction processor last-but-one, so no processor or
caller can leak a registered secret into a log line. Bind `session_id`, `turn_id` and `sandbox`
with `structlog.contextvars.bind_contextvars` and they appear on every line of that task.
"""

from __future__ import annotations

import logging
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


def configure_logging(level: str = "INFO", *, stream: TextIO | None = None, json: bool | None = None) -> None:
    """Configure structlog and the stdlib root logger. Idempotent."""
    out = stream or sys.stderr
    as_json = (not out.isatty()) if json is None else json
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    renderer: Any = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact_processor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=numeric, stream=out, format="%(name)s %(levelname)s %(message)s", force=True)
