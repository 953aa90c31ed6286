"""Reading a CLI's stdout line as one JSON object: the first step of every translator's `feed`."""

from __future__ import annotations

import json
from typing import Any

import structlog

from orchestrator.redaction import redact

log = structlog.get_logger(__name__)


def json_object(line: str, *, runner: str) -> dict[str, Any] | None:
    """The line as a JSON object; None for blank lines, non-JSON noise and non-object values.

    Skipped lines are logged at debug level with a redacted head, never raised: a CLI may print
    banners or warnings on stdout, and one bad line must not end the turn.
    """
    text = line.strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        log.debug("runner.line_skipped", runner=runner, reason="not json", head=redact(text[:200]))
        return None
    if not isinstance(value, dict):
        log.debug("runner.line_skipped", runner=runner, reason="not an object", head=redact(text[:200]))
        return None
    return value
