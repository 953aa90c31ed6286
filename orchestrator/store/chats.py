"""Chats (sessions): who owns them, which assistant, the runners' resume state.

Chat ids are per owner: a client names its chat by `client_id`, unique only among its owner's
chats, and the row's primary key `id` is internal: `internal_chat_id(owner, client_id)`, so two
owners using the same client id get two unrelated chats and neither can detect or squat the other's.
Everything keyed by chat (events, turns, messages, memory, sandboxes) uses the internal id.

`cage serve` caps the chats one owner may have (`bind`, `CAGE_MAX_CHATS_PER_OWNER`): `create`
counts the owner's chats and inserts in one transaction, under SQLite's write lock or a Postgres
advisory lock on the owner, so concurrent creates on any number of replicas never pass the cap.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import JsonValue
from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.store.database import Database, affected, transaction_lock
from orchestrator.store.errors import OwnerChatsFull, RecordExists, RecordNotFound
from orchestrator.store.records import ChatRecord
from orchestrator.store.tables import ChatRow, CheckpointRow, TurnRow

_MAX_LIST = 1000
INTERNAL_PREFIX = "c"
"""Internal ids of client-named chats are `c` + 40 hex digits (41 characters, within String(64))."""


def internal_chat_id(owner: str, client_id: str) -> str:
    """The internal id of `owner`'s chat named `client_id`: a digest of both (owners and client ids
    contain no NUL), so it is the same on every server and injective across owners."""
    digest = hashlib.sha256(f"{owner}\0{client_id}".encode()).hexdigest()
    return INTERNAL_PREFIX + digest[:40]


def chat_record(row: ChatRow) -> ChatRecord:
    return ChatRecord(
        id=row.id,
        owner=row.owner,
        client_id=row.client_id,
        parent_id=row.parent_id,
        assistant_id=row.assistant_id,
        title=row.title,
        created_at=row.created_at,
        updated_at=row.updated_at,
        last_seq=row.last_seq,
        metadata=row.metadata_,
        resume=row.resume,
    )


async def locked_chat(tx: AsyncSession, chat_id: str, now: datetime) -> ChatRow:
    """The chat row, touched (`updated_at`) so that Postgres holds its row lock until commit:
    concurrent turns of one chat then run one after the other.

    Raises:
        RecordNotFound: no such chat.
    """
    await tx.execute(update(ChatRow).where(ChatRow.id == chat_id).values(updated_at=now))
    row = await tx.get(ChatRow, chat_id, populate_existing=True)
    if row is None:
        raise RecordNotFound("chat", chat_id)
    return row


def merged_keys(current: Mapping[str, Any], changes: Mapping[str, JsonValue]) -> dict[str, Any]:
    """`current` with `changes` applied; a None state removes that runner's entry."""
    merged = dict(current)
    for runner, state in changes.items():
        if state is None:
            merged.pop(runner, None)
        else:
            merged[runner] = state
    return merged


async def _chats_of(tx: AsyncSession, owner: str, limit: int) -> int:
    """How many chats `owner` has, counted up to `limit` (the owner index, never more rows)."""
    some = select(ChatRow.id).where(ChatRow.owner == owner).limit(limit).subquery()
    return int(await tx.scalar(select(func.count()).select_from(some)) or 0)


class ChatRepository:
    def __init__(self, db: Database) -> None:
        self._db = db
        self.max_per_owner: int | None = None
        """The most chats one owner may have (`bind`); None: no cap (`cage run`, tests)."""

    def bind(self, *, max_per_owner: int | None) -> None:
        """From now on `create` refuses an owner's chat past `max_per_owner` (child chats count)."""
        self.max_per_owner = max_per_owner

    async def create(
        self,
        owner: str,
        assistant_id: str,
        *,
        title: str = "",
        metadata: Mapping[str, JsonValue] | None = None,
        chat_id: str | None = None,
        client_id: str | None = None,
        parent_id: str | None = None,
    ) -> ChatRecord:
        """A new chat with an empty event log.

        `client_id` is the id its owner chose (the internal id is then `internal_chat_id`);
        `chat_id` sets the internal id itself (the client id is then the same). With neither, both
        are one random id. `parent_id` (internal) makes it a child chat of that one.

        Raises:
            RecordExists: the owner has a chat with this client id, or the internal id is taken.
            OwnerChatsFull: the owner has `max_per_owner` chats already (nothing was written).
        """
        now = self._db.clock()
        internal = chat_id or (internal_chat_id(owner, client_id) if client_id else uuid.uuid4().hex)
        row = ChatRow(
            id=internal,
            owner=owner,
            client_id=client_id or internal,
            parent_id=parent_id,
            assistant_id=assistant_id,
            title=title,
            created_at=now,
            updated_at=now,
            last_seq=0,
            metadata_=dict(metadata or {}),
            resume={},
        )
        try:
            async with self._db.write() as tx:
                if self.max_per_owner is not None:
                    await self._room_for(tx, owner, internal, self.max_per_owner)
                tx.add(row)
        except IntegrityError as err:
            raise RecordExists("chat", row.id) from err
        return chat_record(row)

    async def _room_for(self, tx: AsyncSession, owner: str, internal: str, limit: int) -> None:
        """Inside `create`'s transaction: refuse the owner's chat past `limit`, except that a chat
        which exists already (a concurrent create of the same id won) is `RecordExists`."""
        await transaction_lock(tx, f"chats:{owner}")
        if await _chats_of(tx, owner, limit) < limit:
            return
        if await tx.get(ChatRow, internal) is not None:
            raise RecordExists("chat", internal)
        raise OwnerChatsFull(owner, limit)

    async def get(self, chat_id: str) -> ChatRecord | None:
        async with self._db.read() as tx:
            row = await tx.get(ChatRow, chat_id)
            return None if row is None else chat_record(row)

    async def find(self, owner: str, client_id: str) -> ChatRecord | None:
        """`owner`'s chat named `client_id`; None when that owner has none (whoever else does)."""
        query = select(ChatRow).where(ChatRow.owner == owner, ChatRow.client_id == client_id)
        async with self._db.read() as tx:
            row = await tx.scalar(query)
            return None if row is None else chat_record(row)

    async def require(self, chat_id: str) -> ChatRecord:
        """Like `get`. Raises: RecordNotFound."""
        found = await self.get(chat_id)
        if found is None:
            raise RecordNotFound("chat", chat_id)
        return found

    async def list(
        self, owner: str, *, assistant_id: str | None = None, parent_id: str | None = None, limit: int = 50
    ) -> list[ChatRecord]:
        """The owner's chats (with `parent_id`, only that chat's children), most recently active first."""
        query = select(ChatRow).where(ChatRow.owner == owner)
        if assistant_id is not None:
            query = query.where(ChatRow.assistant_id == assistant_id)
        if parent_id is not None:
            query = query.where(ChatRow.parent_id == parent_id)
        query = query.order_by(ChatRow.updated_at.desc(), ChatRow.id).limit(min(max(limit, 1), _MAX_LIST))
        async with self._db.read() as tx:
            return [chat_record(row) for row in await tx.scalars(query)]

    async def update(
        self,
        chat_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> ChatRecord:
        """Change the title and/or merge keys into the metadata (a None value removes a key).

        Raises:
            RecordNotFound: no such chat.
        """
        async with self._db.write() as tx:
            row = await locked_chat(tx, chat_id, self._db.clock())
            if title is not None:
                row.title = title
            if metadata:
                row.metadata_ = merged_keys(row.metadata_, metadata)
            return chat_record(row)

    async def set_resume(self, chat_id: str, runner: str, state: JsonValue) -> ChatRecord:
        """Store `runner`'s resume state for this chat; None forgets it.

        Raises:
            RecordNotFound: no such chat.
        """
        async with self._db.write() as tx:
            row = await locked_chat(tx, chat_id, self._db.clock())
            row.resume = merged_keys(row.resume, {runner: state})
            return chat_record(row)

    async def delete(self, chat_id: str) -> bool:
        """Delete the chat with its messages, turns, event log and checkpoints. False when there was none."""
        async with self._db.write() as tx:
            turns = select(TurnRow.id).where(TurnRow.chat_id == chat_id)
            await tx.execute(delete(CheckpointRow).where(CheckpointRow.turn_id.in_(turns)))
            result = await tx.execute(delete(ChatRow).where(ChatRow.id == chat_id))
            return bool(affected(result))
