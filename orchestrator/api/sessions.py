"""`SessionService`: sessions as the API sees them (the store and the pipeline call them chats):
who may open which, and starting, steering and answering turns in them.

A session is created on first use with an `assistant_id`. Session ids are per owner: the id a
client names (`ChatRecord.client_id`) is looked up among the caller's own sessions only, so another
owner's session with the same id is never seen, touched, or even looked at (no status, error text
or timing depends on it). This module is the one place that maps ids: the store keys everything by
the internal id (`ChatRecord.id`), and what leaves here for clients (session views, events, frames,
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
from orchestrator.store import ChatRecord, RecordExists, Store
from orchestrator.store.commands import TurnCommand
from orchestrator.stream import Event, event_json, parse_event

log = structlog.get_logger(__name__)
DELETE_WAIT = 10.0
"""Seconds a session delete waits for its cancelled turn to end."""


class SessionView(BaseModel):
    """A session as the API answers it: its chat, named by the id its owner chose."""

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
    def of(cls, chat: ChatRecord, running_turn_id: str | None = None) -> SessionView:
        """The view of `chat`: its fields of the same name as they are, its ids for the client."""
        same = chat.model_dump(include=set(cls.model_fields) - {"id", "parent_id", "running_turn_id"})
        return cls(
            **same, id=chat.client_id, parent_id=_parent_session(chat), running_turn_id=running_turn_id
        )


def _parent_session(chat: ChatRecord) -> str | None:
    if chat.parent_id is None:
        return None
    named = chat.metadata.get("parent_session")
    return named if isinstance(named, str) else chat.parent_id


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
        chat_id: str,
        request_id: str,
        decision: PermissionAnswer,
        message: str | None,
        *,
        actor: str = "user",
    ) -> None: ...

    async def respond_question(
        self, chat_id: str, request_id: str, text: str, *, actor: str = "user"
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

    async def get(self, principal: Principal, chat_id: str, *, owner: str | None = None) -> ChatRecord:
        """The caller's session `chat_id` (a client id); an admin may name another `owner`.

        Raises: NotFound (the owner has no such session, whoever else may have one).
        """
        target = _owner(principal, owner)
        chat = await self._store.chats.find(target, chat_id)
        if chat is None:
            raise NotFound(f"session {chat_id!r} not found")
        return chat

    async def open(self, principal: Principal, chat_id: str, assistant_id: str | None) -> ChatRecord:
        """The caller's session `chat_id`, created for `assistant_id` when the caller has none.

        Raises:
            NotFound: no such session and no (known) assistant to create it with.
            Conflict: the session belongs to another assistant.
        """
        chat = await self._store.chats.find(principal.owner, chat_id)
        if chat is None:
            if not assistant_id:
                raise NotFound(f"session {chat_id!r} not found; pass assistant_id to create it")
            if not await self._catalog.exists(assistant_id):
                raise NotFound(f"assistant {assistant_id!r} not found")
            try:
                chat = await self._store.chats.create(principal.owner, assistant_id, client_id=chat_id)
            except RecordExists:  # created by a concurrent request of the same owner
                chat = await self.get(principal, chat_id)
        if assistant_id and assistant_id != chat.assistant_id:
            raise Conflict(
                f"session {chat_id!r} belongs to assistant {chat.assistant_id!r}, not {assistant_id!r}"
            )
        return chat

    async def sessions(
        self, principal: Principal, owner: str | None = None, limit: int = 50, *, parent: str | None = None
    ) -> list[ChatRecord]:
        """The caller's sessions (with `parent`, that session's sub-agent child sessions); an admin
        may name another owner.

        Raises:
            NotFound: no session `parent` of that owner.
        """
        who = _owner(principal, owner)
        if parent is None:
            return await self._store.chats.list(who, limit=limit)
        chat = await self.get(principal, parent, owner=owner)
        return await self._store.chats.list(who, parent_id=chat.id, limit=limit)

    async def events(
        self, principal: Principal, chat_id: str, after_seq: int, limit: int, *, owner: str | None = None
    ) -> list[Event]:
        """A page of the session's log, as its owner's client knows it."""
        chat = await self.get(principal, chat_id, owner=owner)
        return for_client(chat, await self._store.events.after(chat.id, after_seq, limit))

    async def subscribe(self, chat: ChatRecord, after_seq: int) -> AsyncIterator[Event]:
        """The session's log after `after_seq`, then live (`TurnService.subscribe`), for its client."""
        async for event in self.turns.subscribe(chat.id, after_seq=after_seq):
            yield for_client_one(chat, event)

    async def subscribe_json(self, chat: ChatRecord, after_seq: int) -> AsyncIterator[tuple[Event, str]]:
        """`subscribe`, each event with its JSON as the client gets it (`client_json`): encoded
        once, where `for_client_one` copied, encoded and sometimes re-parsed it before its
        encoder encoded it again."""
        async for event in self.turns.subscribe(chat.id, after_seq=after_seq):
            yield event, client_json(chat, event)

    async def turn_events(self, chat: ChatRecord, handle: TurnHandle) -> AsyncIterator[Event]:
        """The events of `handle` (a turn of `chat`) from its `stream_start` to its `stream_end`."""
        async for event in handle.events():
            yield for_client_one(chat, event)

    async def start(
        self,
        chat: ChatRecord,
        messages: Sequence[InputMessage],
        *,
        attachments: Sequence[Attachment] = (),
        options: TurnOptions | None = None,
        metadata: dict[str, str] | None = None,
    ) -> TurnHandle:
        """Start a turn in `chat` (already authorized with `open`/`get`); the pipeline admits it
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
                owner=chat.owner,
                assistant_id=chat.assistant_id,
                chat_id=chat.id,
                workspace_id=opts.workspace_id,
            )
            try:
                self._caps.take("running turn", chat.owner)
            except BaseException:
                room()
                raise

            def release() -> None:
                self._caps.give_back("running turn", chat.owner)
                room()

            return release

        handle = await self.turns.start(
            TurnInput(
                assistant_id=chat.assistant_id,
                owner=chat.owner,
                chat_id=chat.id,
                messages=tuple(messages),
                attachments=tuple(attachments),
                options=opts,
                metadata=metadata or {},
            ),
            admit=admit,
        )
        self._turn_metrics.track(handle, runner[0] if runner else "unknown")
        log.info("turn started", chat_id=chat.id, turn_id=handle.turn_id, assistant_id=chat.assistant_id)
        return handle

    def running(self, chat_id: str) -> TurnHandle | None:
        """The turn running in `chat_id`, unless its `stream_end` is out already (it is persisting)."""
        handle = self.turns.running(chat_id)
        return None if handle is None or handle.ending else handle

    async def running_turn_id(self, chat_id: str) -> str | None:
        """The id of the turn running in `chat_id` here or on another replica (the database)."""
        handle = self.running(chat_id)
        if handle is not None:
            return handle.turn_id
        if self.turns.running(chat_id) is not None:
            return None  # ended on the wire, persisting
        return await self.steering.running_turn(chat_id)

    async def interrupt(self, principal: Principal, chat_id: str, *, force: bool) -> Interrupted:
        """Interrupt the session's turn, here or on the replica running it.

        Raises: NotFound (no session, or no running turn).
        """
        chat = await self.get(principal, chat_id)
        handle = self.running(chat.id)
        refusal = f"no turn is running in session {chat_id!r}"
        if handle is not None:
            await handle.interrupt(force=force)
            return Interrupted(handle.turn_id)
        turn_id = await self.steering.running_turn(chat.id) if self.turns.running(chat.id) is None else None
        if turn_id is None:
            raise NotFound(refusal)
        body = {"force": force, "turn_id": turn_id, "refusal": refusal}
        done = await self.steering.send(chat.id, "interrupt", body, refusal=refusal)
        return Interrupted(str(done.get("turn_id", turn_id)))

    async def turn_chat(self, principal: Principal, turn_id: str) -> tuple[TurnHandle, ChatRecord]:
        """The running turn `turn_id` and its session.

        Raises: NotFound (no such running turn, or another owner's).
        """
        handle = self.turns.turn(turn_id)
        if handle is None or handle.ending:
            raise NotFound(f"no running turn {turn_id!r}")
        chat = await self._store.chats.get(handle.chat_id)
        if chat is None or (not principal.is_admin and chat.owner != principal.owner):
            raise NotFound(f"no running turn {turn_id!r}")
        return handle, chat

    async def interrupt_turn(self, principal: Principal, turn_id: str, *, force: bool) -> ChatRecord:
        """Interrupt a running turn; returns its session.

        Raises: NotFound (no such running turn, or another owner's).
        """
        handle = self.turns.turn(turn_id)
        if handle is None and self.steering.enabled:  # it may run on another replica
            record = await self._store.turns.get(turn_id)
            chat = await self._store.chats.get(record.chat_id) if record is not None else None
            refusal = f"no running turn {turn_id!r}"
            if record is None or record.status != "running" or chat is None:
                raise NotFound(refusal)
            if not principal.is_admin and chat.owner != principal.owner:
                raise NotFound(refusal)
            body = {"force": force, "turn_id": turn_id, "refusal": refusal}
            await self.steering.send(chat.id, "interrupt", body, refusal=refusal)
            return chat
        handle, chat = await self.turn_chat(principal, turn_id)
        await handle.interrupt(force=force)
        return chat

    async def respond_permission(
        self,
        principal: Principal,
        chat_id: str,
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
        chat = await self.get(principal, chat_id, owner=owner)
        body = {"request_id": request_id, "decision": decision, "message": message, "actor": principal.key_id}
        if await self._elsewhere(chat.id):
            await self.steering.send(
                chat.id, "permission", body, refusal=_no_request("permission", request_id)
            )
            return
        await self._answer(chat.id, "permission", body)

    async def respond_question(
        self, principal: Principal, chat_id: str, request_id: str, text: str, *, owner: str | None = None
    ) -> None:
        """Answer a waiting `question` of the session (its owner's, or an admin naming the `owner`).

        Raises: NotFound (no session, or no such question waiting), UsageError.
        """
        chat = await self.get(principal, chat_id, owner=owner)
        body = {"request_id": request_id, "text": text, "actor": principal.key_id}
        if await self._elsewhere(chat.id):
            await self.steering.send(chat.id, "question", body, refusal=_no_request("question", request_id))
            return
        await self._answer(chat.id, "question", body)

    async def _elsewhere(self, chat_id: str) -> bool:
        """True when the chat's turn runs on another replica (none here, one in the database)."""
        return self.turns.running(chat_id) is None and await self.steering.running_turn(chat_id) is not None

    async def _answer(self, chat_id: str, kind: str, body: dict[str, Any]) -> None:
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
            await self.turns.respond_permission(chat_id, request_id, decision, message, actor=actor)
        else:
            await self.turns.respond_question(chat_id, request_id, str(body["text"]), actor=actor)

    def _holds(self, chat_id: str) -> bool:
        """Whether this replica runs the chat's turn (and so takes commands for it)."""
        return self.turns.running(chat_id) is not None

    async def _act(self, command: TurnCommand) -> dict[str, Any]:
        """Carry out another replica's command for a turn running here, as a local request would.

        Raises: NotFound, UsageError (the same refusals as a local request).
        """
        body = command.body
        if command.kind == "interrupt":
            handle = self.running(command.chat_id)
            if handle is None or handle.turn_id != body.get("turn_id", handle.turn_id):
                raise NotFound(str(body.get("refusal", "no turn is running in this session")))
            await handle.interrupt(force=bool(body.get("force")))
            return {"turn_id": handle.turn_id}
        if command.kind in ("permission", "question"):
            await self._answer(command.chat_id, command.kind, body)
            return {}
        raise UsageError(f"unknown turn command {command.kind!r}")

    async def delete(self, principal: Principal, chat_id: str, *, owner: str | None = None) -> None:
        """Cancel a running turn (waiting for its end, bounded), then delete the session and its log.

        Raises: NotFound.
        """
        chat = await self.get(principal, chat_id, owner=owner)
        handle = self.turns.running(chat.id)
        if handle is not None:
            await handle.interrupt(force=True)
            with anyio.move_on_after(DELETE_WAIT):
                await handle.result()
        await self._store.chats.delete(chat.id)
        await self._store.audit.record(
            principal.key_id, "session.delete", chat.client_id, {"owner": chat.owner}
        )


def _owner(principal: Principal, owner: str | None) -> str:
    """Whose sessions a lookup searches: the caller's, or (admin only) the named owner's."""
    return owner if owner is not None and principal.is_admin else principal.owner


def for_client_one(chat: ChatRecord, event: Event) -> Event:
    """`event` as the session's client knows it: the internal id, wherever the pipeline put it
    (`session_id`, `stream_start`'s `chat_id`, a sub-agent's session id), reads as the client id."""
    if chat.id == chat.client_id:
        return event
    if event.session_id == chat.id:
        event = event.model_copy(update={"session_id": chat.client_id})
    wire = event_json(event)
    if chat.id not in wire:
        return event
    return parse_event(wire.replace(chat.id, chat.client_id))


def client_json(chat: ChatRecord, event: Event) -> str:
    """The JSON of `for_client_one(chat, event)`: the event's own, the internal id read as the
    client id wherever it is."""
    wire = event_json(event)
    return wire if chat.id == chat.client_id else wire.replace(chat.id, chat.client_id)


def for_client(chat: ChatRecord, events: Iterable[Event]) -> list[Event]:
    return [for_client_one(chat, event) for event in events]


async def session_views(sessions: SessionService, chats: Sequence[ChatRecord]) -> list[SessionView]:
    """The sessions as clients see them, each with the turn running in it here or on another
    replica (one query for all the chats whose turn, if any, is not here)."""
    here: dict[str, str | None] = {}
    for chat in chats:
        handle = sessions.running(chat.id)
        if handle is not None:
            here[chat.id] = handle.turn_id
        elif sessions.turns.running(chat.id) is not None:
            here[chat.id] = None  # ended on the wire, persisting
    elsewhere = await sessions.steering.running_turns([c.id for c in chats if c.id not in here])
    return [
        SessionView.of(chat, here[chat.id] if chat.id in here else elsewhere.get(chat.id)) for chat in chats
    ]


async def session_view(sessions: SessionService, chat: ChatRecord) -> SessionView:
    return (await session_views(sessions, [chat]))[0]
