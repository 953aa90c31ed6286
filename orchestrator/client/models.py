"""What the server answers, as the client reads it: open models (`extra="allow"`), so a newer
server's additional fields do not break an older client.

Each is named after the API's response model it reads (`orchestrator.api`'s `SessionView`,
`SandboxView`, `ExecResult`: one wire object, one name). The API's are strict and the client may
not import them (the client speaks only the wire protocol), so the shape is declared twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

_OPEN = ConfigDict(extra="allow", frozen=True)


class SessionView(BaseModel):
    model_config = _OPEN
    id: str
    owner: str
    assistant_id: str
    title: str = ""
    created_at: datetime
    updated_at: datetime
    last_seq: int
    running_turn_id: str | None = None


class SandboxView(BaseModel):
    model_config = _OPEN
    name: str
    owner: str
    assistant_id: str
    lifecycle: str
    status: str
    idle_seconds: float
    age_seconds: float
    image: str | None = None
    usage: dict[str, Any] | None = None


class ExecResult(BaseModel):
    model_config = _OPEN
    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool = False
    timed_out: bool = False
