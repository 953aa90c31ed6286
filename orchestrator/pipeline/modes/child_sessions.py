"""`StoreChildSessions`: the sub-agents' child sessions of a turn, persisted in the store.

Each sub-agent of the `agent` tool gets a session row of its own (`parent_id` = the turn's session, the
same owner and assistant, titled with the task's name) and writes its events into that session's log,
stamped by its own `SessionEmitter`: they never enter the parent's timeline. The parent session's
client id is kept in the child's metadata (`parent_session`), which is how API clients see the link.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import anyio
from pydantic import JsonValue

from orchestrator.llm.subagent import MAX_TASK_TEXT
from orchestrator.store import Store
from orchestrator.stream import Event, SessionEmitter

PARENT_KEY = "parent_session"
"""Child session metadata: the parent session's id as its owner names it."""
TASK_KEY = "task"


class StoredChildSession:
    """One child session: its id and an emit into its own log (in order, one batch at a time)."""

    def __init__(self, store: Store, session_id: str, turn_id: str) -> None:
        self._store = store
        self._id = session_id
        self._turn_id = turn_id
        self._emitter = SessionEmitter.resume(session_id, 0)
        self._lock = anyio.Lock()

    @property
    def id(self) -> str:
        return self._id

    async def emit(self, events: Sequence[Event]) -> None:
        if not events:
            return
        async with self._lock:
            stamped = self._emitter.stamp_all(events, turn_id=self._turn_id)
            await self._store.events.append(self._id, stamped)


class StoreChildSessions:
    """`ChildSessions` for one turn: children of `parent_session_id`, owned like it."""

    def __init__(
        self, store: Store, *, owner: str, assistant_id: str, parent_session_id: str, turn_id: str
    ) -> None:
        self._store = store
        self._owner = owner
        self._assistant_id = assistant_id
        self._parent = parent_session_id
        self._turn_id = turn_id

    async def open(self, name: str, task: str) -> StoredChildSession:
        """A new child session for the task.

        Raises:
            StoreError: the session could not be written (the task fails with it).
        """
        parent = await self._store.sessions.require(self._parent)
        metadata: dict[str, JsonValue] = {PARENT_KEY: parent.client_id, TASK_KEY: task[:MAX_TASK_TEXT]}
        record = await self._store.sessions.create(
            self._owner,
            self._assistant_id,
            title=name,
            metadata=metadata,
            session_id=f"sub-{uuid.uuid4().hex[:24]}",  # internal and client id alike: events name it
            parent_id=parent.id,
        )
        return StoredChildSession(self._store, record.id, self._turn_id)
