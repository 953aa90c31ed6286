"""Where a runner's resume state (Claude session id, Codex thread id, ...) lives between turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

import anyio
from anyio import to_thread


class ResumeStore(Protocol):
    """Resume state per (assistant, chat, runner); the pipeline passes it back as `turn.resume`."""

    async def get(self, assistant_id: str, chat_id: str, runner: str) -> dict[str, str]: ...

    async def put(self, assistant_id: str, chat_id: str, runner: str, state: dict[str, str]) -> None: ...


def _key(assistant_id: str, chat_id: str, runner: str) -> str:
    return f"{assistant_id}\x1f{chat_id}\x1f{runner}"


class MemoryResumeStore:
    """In-process resume states (tests, one-shot CLI runs without a data dir)."""

    def __init__(self) -> None:
        self._states: dict[str, dict[str, str]] = {}

    async def get(self, assistant_id: str, chat_id: str, runner: str) -> dict[str, str]:
        return dict(self._states.get(_key(assistant_id, chat_id, runner), {}))

    async def put(self, assistant_id: str, chat_id: str, runner: str, state: dict[str, str]) -> None:
        self._states[_key(assistant_id, chat_id, runner)] = dict(state)


class JsonResumeStore:
    """Resume states in one JSON file (the CLI's store when no database is used). Writes are atomic."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = anyio.Lock()

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, dict[str, str]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(self.path)

    async def get(self, assistant_id: str, chat_id: str, runner: str) -> dict[str, str]:
        data = await to_thread.run_sync(self._read)
        return dict(data.get(_key(assistant_id, chat_id, runner), {}))

    async def put(self, assistant_id: str, chat_id: str, runner: str, state: dict[str, str]) -> None:
        async with self._lock:
            data = await to_thread.run_sync(self._read)
            data[_key(assistant_id, chat_id, runner)] = dict(state)
            await to_thread.run_sync(self._write, data)
