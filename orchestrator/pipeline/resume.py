"""Where a runner's resume state (Claude session id, Codex thread id, ...) lives between turns:
the `ResumeStore` protocol, and `SessionResumeStore`, which keeps it on the session row."""

from __future__ import annotations

from typing import Protocol

from orchestrator.store import Store


class ResumeStore(Protocol):
    """Resume state per (assistant, session, runner); the pipeline passes it back as `turn.resume`."""

    async def get(self, assistant_id: str, session_id: str, runner: str) -> dict[str, str]: ...

    async def put(self, assistant_id: str, session_id: str, runner: str, state: dict[str, str]) -> None: ...


def resume_key(assistant_id: str, runner: str) -> str:
    """One entry per (assistant, runner) in a session, so a delegate never resumes another's session."""
    return f"{runner}:{assistant_id}"


class SessionResumeStore:
    """`ResumeStore` on the store's sessions (`store.sessions.set_resume`): survives restarts, deleted
    with the session."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def get(self, assistant_id: str, session_id: str, runner: str) -> dict[str, str]:
        session = await self._store.sessions.get(session_id)
        if session is None:
            return {}
        state = session.resume.get(resume_key(assistant_id, runner))
        if not isinstance(state, dict):
            return {}
        return {str(k): str(v) for k, v in state.items() if v is not None}

    async def put(self, assistant_id: str, session_id: str, runner: str, state: dict[str, str]) -> None:
        await self._store.sessions.set_resume(session_id, resume_key(assistant_id, runner), dict(state))
