"""Checkpoints: a snapshot of a run after every step, so a crashed turn can be read and resumed.

The store implements `CheckpointSink` on the database; `MemoryCheckpoints` and
`JsonFileCheckpoints` are the two shipped here (tests, the tai CLI's `--checkpoint-dir`).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import UsageError
from orchestrator.llm.messages import ChatMessage
from orchestrator.stream import Usage

Phase = Literal["model", "tools", "done"]


class Checkpoint(BaseModel):
    """The run after a step: `model` (the assistant message is in, its tool calls may be pending),
    `tools` (their results are in), or `done` (the run stopped, `stop_reason` says why)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    session_id: str
    turn_id: str
    round: int
    phase: Phase
    messages: tuple[ChatMessage, ...]
    usage: Usage
    stop_reason: str | None = None
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class CheckpointSink(Protocol):
    async def save(self, checkpoint: Checkpoint) -> None: ...


class MemoryCheckpoints:
    """Keeps every checkpoint in a list (tests, short-lived runs)."""

    def __init__(self) -> None:
        self.saved: list[Checkpoint] = []

    async def save(self, checkpoint: Checkpoint) -> None:
        self.saved.append(checkpoint)

    def latest(self, turn_id: str) -> Checkpoint | None:
        return next((c for c in reversed(self.saved) if c.turn_id == turn_id), None)


def _safe_name(turn_id: str) -> str:
    if not turn_id or "/" in turn_id or turn_id.startswith(".") or "\x00" in turn_id:
        raise UsageError(f"turn id {turn_id!r} cannot name a checkpoint file")
    return f"{turn_id}.json"


class JsonFileCheckpoints:
    """One JSON file per turn (`<dir>/<turn_id>.json`), replaced atomically on every save."""

    def __init__(self, directory: Path | str) -> None:
        self._dir = Path(directory)

    async def save(self, checkpoint: Checkpoint) -> None:
        target = self._dir / _safe_name(checkpoint.turn_id)
        temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        await anyio.Path(self._dir).mkdir(parents=True, exist_ok=True)
        await anyio.Path(temp).write_text(checkpoint.model_dump_json(), encoding="utf-8")
        await anyio.Path(temp).replace(target)

    async def load(self, turn_id: str) -> Checkpoint | None:
        path = anyio.Path(self._dir / _safe_name(turn_id))
        if not await path.exists():
            return None
        return Checkpoint.model_validate_json(await path.read_text(encoding="utf-8"))
