"""Where a runner's resume state (Claude session id, Codex thread id, ...) lives between turns."""

from __future__ import annotations

from typing import Protocol


class ResumeStore(Protocol):
    """Resume state per (assistant, chat, runner); the pipeline passes it back as `turn.resume`."""

    async def get(self, assistant_id: str, chat_id: str, runner: str) -> dict[str, str]: ...

    async def put(self, assistant_id: str, chat_id: str, runner: str, state: dict[str, str]) -> None: ...
