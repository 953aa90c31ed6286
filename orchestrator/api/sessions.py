"""`SessionService`: sessions as the API sees them (the store and the pipeline call them sessions):
who may open which, and starting, steering and answering turns in them.

A session is created on first use with an `assistant_id`. Session ids are per owner: the id a
client names (`SessionRecord.client_id`) is looked up among the caller's own sessions only, so another
owner's session with the same id is never seen, touched, or even looked at (no status, error text
or timing depends on it). This module is the one place that maps ids: the store keys everything by
the internal id (`SessionRecord.id`), and what leaves here for clients (session views, events, frames,
headers) carries the client id. An admin reaches another owner's session by naming that owner.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import anyio
import structlog
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from orchestrator.api.auth import Principal
from orchestrator.api.caps import OwnerCaps
from orchestrator.api.catalog import Catalog
from orchestrator.api.steering import Steering
from orchestrator.api.turn_metrics import TurnMetrics
from orchestrator.dsl import Assistant
from orchestrator.errors import Conflict, NotFound, UsageError
from orchestrator.pipeline import (
    Attachment,
    InputMessage,
    PermissionAnswer,
    Release,
    TurnHandle,
    TurnInput,
    TurnOptions,
    TurnService,
)
from orchestrator.sandbox import SandboxManager
from orchestrator.store import RecordExists, SessionRecord, Store
from orchestrator.store.commands import TurnCommand
from orchestrator.stream import Event, event_json, parse_event

log = structlog.get_logger(__name__)
DELETE_WAIT = 10.0
"""Seconds a session delete waits for its cancelled turn to end."""


class SessionView(BaseModel):
    """A session as the API answers it: its session, named by the id its owner chose."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    """The session's id as its owner names it (unique per owner; another owner may use the same)."""
    owner: str
    assistant_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    last_seq: int
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    running_turn_id: str | None = None
    parent_id: str | None = None
    """A sub-agent's child session: the id of the session whose turn started it."""

    @classmethod
    def of(cls, session: SessionRecord, running_turn_id: str | None = None) -> SessionView:
        """The view of `session`: its fields of the same name as they are, its ids for the client."""
        same = session.model_dump(include=set(cls.model_fields) - {"id", "parent_id", "running_turn_id"})
        return cls(
            **same, id=session.client_id, parent_id=_parent_session(session), running_turn_id=running_turn_id
        )


def _parent_session(session: SessionRecord) -> str | None:
    if session.parent_id is None:
        return None
    named = session.metadata.get("parent_session")
    return named if isinstance(named, str) else session.parent_id


@dataclass(frozen=True)
class Interrupted:
    """An interrupt on its way to the turn `turn_id` (on this replica or another)."""

    turn_id: str


def _no_request(kind: str, request_id: str) -> str:
    """The refusal of an answer to a request no one holds (the broker's words)."""
    noun = "permission request" if kind == "permission" else "question"
    return f"no {noun} {request_id!r} is waiting in this session (never asked, answered or expired)"


@runtime_checkable
class PermissionResponder(Protocol):
    """Optional pipeline capability: deliver a user's answer to a `permission/request` event or
    a `question` (the pipeline service has it; a test double may not)."""

    async def respond_permission(
        self,
        session_id: str,
        request_id: str,
        decision: PermissionAnswer,
        message: str | None,
        *,
        actor: str = "user",
    ) -> None: ...

    async def respond_question(
        self, session_id: str, request_id: str, text: str, *, actor: str = "user"
    ) -> None: ...


class SessionService:
    """The API's sessions: lookups by client id, turns (admitted by the pipeline), interrupts and
    answers here or on the replica that runs the turn."""

    def __init__(
        self,
        store: Store,
        turns: TurnService,
        catalog: Catalog,
        manager: SandboxManager,
        turn_metrics: TurnMetrics,
        caps: OwnerCaps | None = None,
    ) -> None:
        self._caps = caps or OwnerCaps({"running turn": 1_000_000})
        self._store = store
        self.turns = turns
        self._catalog = catalog
        self._manager = manager
        self._turn_metrics = turn_metrics
        self.steering = Steering(store, holds=self._holds, act=self._act)
        """Interrupts and answers for turns another replica runs (Postgres), and theirs for ours."""
        self.steering.listen()

    async def get(self, principal: Principal, session_id: str, *, owner: str | None = None) -> SessionRecord:
        """The caller's session `session_id` (a client id); an admin may name another `owner`.

        Raises: NotFound (the owner has no such session, whoever else may have one).
        """
        target = _owner(principal, owner)
        session = await self._store.sessions.find(target, session_id)
        if session is None:
            raise NotFound(f"session {session_id!r} not found")
        return session

    async def open(self, principal: Principal, session_id: str, assistant_id: str | None) -> SessionRecord:
        """The caller's session `session_id`, created for `assistant_id` when the caller has none.

        Raises:
            NotFound: no such session and no (known) assistant to create it with.
            Conflict: the session belongs to another assistant.
        """
        session = await self._store.sessions.find(principal.owner, session_id)
        if session is None:
            if not assistant_id:
                raise NotFound(f"session {session_id!r} not found; pass assistant_id to create it")
            if not await self._catalog.exists(assistant_id):
                raise NotFound(f"assistant {assistant_id!r} not found")
            try:
                session = await self._store.sessions.create(
                    principal.owner, assistant_id, client_id=session_id
                )
            except RecordExists:  # created by a concurrent request of the same owner
                session = await self.get(principal, session_id)
        if assistant_id and assistant_id != session.assistant_id:
            raise Conflict(
                f"session {session_id!r} belongs to assistant {session.assistant_id!r}, not {assistant_id!r}"
            )
        return session

    async def recent(
        self, principal: Principal, owner: str | None = None, limit: int = 50, *, parent: str | None = None
    ) -> list[SessionRecord]:
        """The caller's sessions (with `parent`, that session's sub-agent child sessions); an admin
        may name another owner.

        Raises:
            NotFound: no session `parent` of that owner.
        """
        who = _owner(principal, owner)
        if parent is None:
            return await self._store.sessions.list(who, limit=limit)
        session = await self.get(principal, parent, owner=owner)
        return await self._store.sessions.list(who, parent_id=session.id, limit=limit)

    async def events(
        self, principal: Principal, session_id: str, after_seq: int, limit: int, *, owner: str | None = None
    ) -> list[Event]:
        """A page of the session's log, as its owner's client knows it."""
        session = await self.get(principal, session_id, owner=owner)
        return for_client(session, await self._store.events.after(session.id, after_seq, limit))

    async def subscribe(self, session: SessionRecord, after_seq: int) -> AsyncIterator[Event]:
        """The session's log after `after_seq`, then live (`TurnService.subscribe`), for its client."""
        async for event in self.turns.subscribe(session.id, after_seq=after_seq):
            yield for_client_one(session, event)

    async def subscribe_json(
        self, session: SessionRecord, after_seq: int
    ) -> AsyncIterator[tuple[Event, str]]:
        """`subscribe`, each event with its JSON as the client gets it (`client_json`): encoded
        once, where `for_client_one` copied, encoded and sometimes re-parsed it before its
        encoder encoded it again."""
        async for event in self.turns.subscribe(session.id, after_seq=after_seq):
            yield event, client_json(session, event)

    async def turn_events(self, session: SessionRecord, handle: TurnHandle) -> AsyncIterator[Event]:
        """The events of `handle` (a turn of `session`) from its `stream_start` to its `stream_end`."""
        async for event in handle.events():
            yield for_client_one(session, event)

    async def start(
        self,
        session: SessionRecord,
        messages: Sequence[InputMessage],
        *,
        attachments: Sequence[Attachment] = (),
        options: TurnOptions | None = None,
        metadata: dict[str, str] | None = None,
    ) -> TurnHandle:
        """Start a turn in `session` (already authorized with `open`/`get`); the pipeline admits it
        (`TurnService.start`), holding it to the owner's sandbox quota and running-turn cap.

        Raises:
            Conflict: a turn is already running in this session (the API rejects, never queues).
            CapacityError: the turn would need a sandbox past the owner's cap, or the owner has
                `max_turns_per_owner` turns running.
            NotFound, ConfigError: from the pipeline.
        """
        if not messages:
            raise UsageError("a turn needs at least one message")
        opts = options or TurnOptions()
        runner: list[str] = []

        def admit(assistant: Assistant) -> Release:
            spec = assistant.sandbox
            runner.append(spec.runner.name if spec is not None else assistant.mode.value)
            room = self._manager.admission.admit(
                spec,
                owner=session.owner,
                assistant_id=session.assistant_id,
                session_id=session.id,
                workspace_id=opts.workspace_id,
            )
            try:
                self._caps.take("running turn", session.owner)
            except BaseException:
                room()
                raise

            def release() -> None:
                self._caps.give_back("running turn", session.owner)
                room()

            return release

        handle = await self.turns.start(
            TurnInput(
                assistant_id=session.assistant_id,
                owner=session.owner,
                session_id=session.id,
                messages=tuple(messages),
                attachments=tuple(attachments),
                options=opts,
                metadata=metadata or {},
            ),
            admit=admit,
        )
        self._turn_metrics.track(handle, runner[0] if runner else "unknown")
        log.info(
            "turn started", session_id=session.id, turn_id=handle.turn_id, assistant_id=session.assistant_id
        )
        return handle

    def running(self, session_id: str) -> TurnHandle | None:
        """The turn running in `session_id`, unless its `stream_end` is out already (it is persisting)."""
        handle = self.turns.running(session_id)
        return None if handle is None or handle.ending else handle

    async def running_turn_id(self, session_id: str) -> str | None:
        """The id of the turn running in `session_id` here or on another replica (the database)."""
        handle = self.running(session_id)
        if handle is not None:
            return handle.turn_id
        if self.turns.running(session_id) is not None:
            return None  # ended on the wire, persisting
        return await self.steering.running_turn(session_id)

    async def interrupt(self, principal: Principal, session_id: str, *, force: bool) -> Interrupted:
        """Interrupt the session's turn, here or on the replica running it.

        Raises: NotFound (no session, or no running turn).
        """
        session = await self.get(principal, session_id)
        handle = self.running(session.id)
        refusal = f"no turn is running in session {session_id!r}"
        if handle is not None:
            await handle.interrupt(force=force)
            return Interrupted(handle.turn_id)
        turn_id = (
            await self.steering.running_turn(session.id) if self.turns.running(session.id) is None else None
        )
        if turn_id is None:
            raise NotFound(refusal)
        body = {"force": force, "turn_id": turn_id, "refusal": refusal}
        done = await self.steering.send(session.id, "interrupt", body, refusal=refusal)
        return Interrupted(str(done.get("turn_id", turn_id)))

    async def turn_session(self, principal: Principal, turn_id: str) -> tuple[TurnHandle, SessionRecord]:
        """The running turn `turn_id` and its session.

        Raises: NotFound (no such running turn, or another owner's).
        """
        handle = self.turns.turn(turn_id)
        if handle is None or handle.ending:
            raise NotFound(f"no running turn {turn_id!r}")
        session = await self._store.sessions.get(handle.session_id)
        if session is None or (not principal.is_admin and session.owner != principal.owner):
            raise NotFound(f"no running turn {turn_id!r}")
        return handle, session

    async def interrupt_turn(self, principal: Principal, turn_id: str, *, force: bool) -> SessionRecord:
        """Interrupt a running turn; returns its session.

        Raises: NotFound (no such running turn, or another owner's).
        """
        handle = self.turns.turn(turn_id)
        if handle is None and self.steering.enabled:  # it may run on another replica
            record = await self._store.turns.get(turn_id)
            session = await self._store.sessions.get(record.session_id) if record is not None else None
            refusal = f"no running turn {turn_id!r}"
            if record is None or record.status != "running" or session is None:
                raise NotFound(refusal)
            if not principal.is_admin and session.owner != principal.owner:
                raise NotFound(refusal)
            body = {"force": force, "turn_id": turn_id, "refusal": refusal}
            await self.steering.send(session.id, "interrupt", body, refusal=refusal)
            return session
        handle, session = await self.turn_session(principal, turn_id)
        await handle.interrupt(force=force)
        return session

    async def respond_permission(
        self,
        principal: Principal,
        session_id: str,
        request_id: str,
        decision: PermissionAnswer,
        message: str | None,
        *,
        owner: str | None = None,
    ) -> None:
        """Answer a waiting `permission/request` of the session (its owner's, or an admin naming
        the `owner`); audited with the caller's key.

        Raises: NotFound (no session, or no such request waiting), UsageError (the pipeline
        takes no answers, or the id is a question's).
        """
        session = await self.get(principal, session_id, owner=owner)
        body = {"request_id": request_id, "decision": decision, "message": message, "actor": principal.key_id}
        if await self._elsewhere(session.id):
            await self.steering.send(
                session.id, "permission", body, refusal=_no_request("permission", request_id)
            )
            return
        await self._answer(session.id, "permission", body)

    async def respond_question(
        self, principal: Principal, session_id: str, request_id: str, text: str, *, owner: str | None = None
    ) -> None:
        """Answer a waiting `question` of the session (its owner's, or an admin naming the `owner`).

        Raises: NotFound (no session, or no such question waiting), UsageError.
        """
        session = await self.get(principal, session_id, owner=owner)
        body = {"request_id": request_id, "text": text, "actor": principal.key_id}
        if await self._elsewhere(session.id):
            await self.steering.send(
                session.id, "question", body, refusal=_no_request("question", request_id)
            )
            return
        await self._answer(session.id, "question", body)

    async def _elsewhere(self, session_id: str) -> bool:
        """True when the session's turn runs on another replica (none here, one in the database)."""
        return (
            self.turns.running(session_id) is None
            and await self.steering.running_turn(session_id) is not None
        )

    async def _answer(self, session_id: str, kind: str, body: dict[str, Any]) -> None:
        """Hand an answer to this process's broker (a client's here, or another replica's command).

        Raises: NotFound (no such request waiting), UsageError.
        """
        if not isinstance(self.turns, PermissionResponder):
            what = "ask for permissions" if kind == "permission" else "ask questions"
            raise UsageError(f"this pipeline does not {what}; nothing to answer")
        request_id, actor = str(body["request_id"]), str(body["actor"])
        if kind == "permission":
            decision: PermissionAnswer = body["decision"]
            message = body.get("message")
            await self.turns.respond_permission(session_id, request_id, decision, message, actor=actor)
        else:
            await self.turns.respond_question(session_id, request_id, str(body["text"]), actor=actor)

    def _holds(self, session_id: str) -> bool:
        """Whether this replica runs the session's turn (and so takes commands for it)."""
        return self.turns.running(session_id) is not None

    async def _act(self, command: TurnCommand) -> dict[str, Any]:
        """Carry out another replica's command for a turn running here, as a local request would.

        Raises: NotFound, UsageError (the same refusals as a local request).
        """
        body = command.body
        if command.kind == "interrupt":
            handle = self.running(command.session_id)
            if handle is None or handle.turn_id != body.get("turn_id", handle.turn_id):
                raise NotFound(str(body.get("refusal", "no turn is running in this session")))
            await handle.interrupt(force=bool(body.get("force")))
            return {"turn_id": handle.turn_id}
        if command.kind in ("permission", "question"):
            await self._answer(command.session_id, command.kind, body)
            return {}
        raise UsageError(f"unknown turn command {command.kind!r}")

    async def delete(self, principal: Principal, session_id: str, *, owner: str | None = None) -> None:
        """Cancel a running turn (waiting for its end, bounded), then delete the session and its log.

        Raises: NotFound.
        """
        session = await self.get(principal, session_id, owner=owner)
        handle = self.turns.running(session.id)
        if handle is not None:
            await handle.interrupt(force=True)
            with anyio.move_on_after(DELETE_WAIT):
                await handle.result()
        await self._store.sessions.delete(session.id)
        await self._store.audit.record(
            principal.key_id, "session.delete", session.client_id, {"owner": session.owner}
        )


def _owner(principal: Principal, owner: str | None) -> str:
    """Whose sessions a lookup searches: the caller's, or (admin only) the named owner's."""
    return owner if owner is not None and principal.is_admin else principal.owner


def for_client_one(session: SessionRecord, event: Event) -> Event:
    """`event` as the session's client knows it: the internal id, wherever the pipeline put it
    (`session_id`, `stream_start`'s `session_id`, a sub-agent's session id), reads as the client id."""
    if session.id == session.client_id:
        return event
    if event.session_id == session.id:
        event = event.model_copy(update={"session_id": session.client_id})
    wire = event_json(event)
    if session.id not in wire:
        return event
    return parse_event(wire.replace(session.id, session.client_id))


def client_json(session: SessionRecord, event: Event) -> str:
    """The JSON of `for_client_one(session, event)`: the event's own, the internal id read as the
    client id wherever it is."""
    wire = event_json(event)
    return wire if session.id == session.client_id else wire.replace(session.id, session.client_id)


def for_client(session: SessionRecord, events: Iterable[Event]) -> list[Event]:
    return [for_client_one(session, event) for event in events]


async def session_views(service: SessionService, sessions: Sequence[SessionRecord]) -> list[SessionView]:
    """The sessions as clients see them, each with the turn running in it here or on another
    replica (one query for all the sessions whose turn, if any, is not here)."""
    here: dict[str, str | None] = {}
    for session in sessions:
        handle = service.running(session.id)
        if handle is not None:
            here[session.id] = handle.turn_id
        elif service.turns.running(session.id) is not None:
            here[session.id] = None  # ended on the wire, persisting
    elsewhere = await service.steering.running_turns([c.id for c in sessions if c.id not in here])
    return [
        SessionView.of(session, here[session.id] if session.id in here else elsewhere.get(session.id))
        for session in sessions
    ]


async def session_view(sessions: SessionService, session: SessionRecord) -> SessionView:
    return (await session_views(sessions, [session]))[0]
