"""Limits on what a client may send: ids, token and time budgets, replay positions (the API's
request models and the websocket frames check them)."""

from __future__ import annotations

SESSION_ID = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$"
"""Session ids: they name session sandboxes too, so only `[A-Za-z0-9_.-]`, at most 64 characters
(the store's and the sandbox identity's limit), and no leading dot (no `.` or `..`)."""
MAX_TOKENS = 10_000_000
"""Largest `max_tokens` a request may ask for."""
MAX_TURN_SECONDS = 7 * 86400
"""Longest `turn_timeout` a request may ask for."""
MAX_SEQ = 2**62
"""Largest `after_seq` accepted (a 64-bit integer column holds every real seq)."""
