"""`summary.json`: what `cage run` reports about a turn (the patch is `snapshot.py`'s, the writing
`outputs.py`'s)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from orchestrator.stream import Usage


class PermissionDecision(BaseModel):
    """One tool call decided by the permissions policy in CI mode (`cage run --permissions`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    request_id: str
    tool: str | None = None
    decision: Literal["allow", "deny"]
    by: Literal["user", "policy", "timeout"]
    rule: str | None = None
    message: str | None = None


class TurnSummary(BaseModel):
    """`summary.json`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    assistant: str
    runner: str | None
    session_id: str
    turn_id: str
    status: str
    stop_reason: str | None = None
    error: str | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    duration_ms: int = 0
    files_changed: list[str] = []
    files_skipped: dict[str, str] = {}
    """Paths left out of `changes.patch`, with why (too large, not a regular file, budget used up)."""
    exit_code: int = 0
    data: JsonValue = None
    """What the assistant's Next hook returned as `data`."""
    metadata: dict[str, JsonValue] | None = None
    """What the assistant's Next hook returned as `metadata`."""
    permissions: list[PermissionDecision] = []
    """Every tool call the `permissions` policy decided, in order (`permission/resolved` events)."""
