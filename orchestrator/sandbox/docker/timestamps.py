"""The engine's timestamps: RFC 3339 strings with up to nanoseconds (`2026-12-01T19:31:14.123456789Z`,
or with an offset, `...14+01:00`)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?")


def engine_time(value: str | None) -> datetime | None:
    """An engine timestamp as an aware UTC datetime; None for none, the zero time ("never") and
    anything unreadable."""
    if not value or value.startswith("0001-"):
        return None
    match = _STAMP.fullmatch(value)
    if match is None:
        return None
    seconds, frac, zone = match.groups()
    offset = "+00:00" if zone in (None, "Z") else zone
    try:
        when = datetime.fromisoformat(f"{seconds}.{(frac or '').ljust(6, '0')[:6]}{offset}")
    except ValueError:
        return None
    return when.astimezone(UTC)


def engine_age(value: object) -> float:
    """Seconds since an engine timestamp; 0 when there is none or it cannot be read."""
    when = engine_time(value) if isinstance(value, str) else None
    return 0.0 if when is None else (datetime.now(UTC) - when).total_seconds()
