"""Assistants created over the API: package, prompts and sandbox as JSON documents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue
from sqlalchemy import bindparam, delete, select
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError

from orchestrator.store.database import Database, affected
from orchestrator.store.errors import RecordExists, RecordNotFound
from orchestrator.store.records import AssistantRecord
from orchestrator.store.tables import AssistantRow, table

_MAX_LIST = 1000


_ONE = select(table(AssistantRow)).where(table(AssistantRow).c.id == bindparam("p_id"))


def _record(row: AssistantRow | Row[Any]) -> AssistantRecord:
    """The record of an assistant's ORM object or of its Core row (the same names)."""
    return AssistantRecord(
        id=row.id,
        owner=row.owner,
        package=row.package,
        prompts=row.prompts,
        sandbox=row.sandbox,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class AssistantRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self,
        assistant_id: str,
        *,
        owner: str,
        package: Mapping[str, JsonValue],
        prompts: JsonValue = None,
        sandbox: Mapping[str, JsonValue] | None = None,
    ) -> AssistantRecord:
        """Raises: RecordExists when the id is taken."""
        now = self._db.clock()
        row = AssistantRow(
            id=assistant_id,
            owner=owner,
            package=dict(package),
            prompts=prompts if prompts is not None else [],
            sandbox=dict(sandbox) if sandbox is not None else None,
            created_at=now,
            updated_at=now,
        )
        try:
            async with self._db.write() as tx:
                tx.add(row)
        except IntegrityError as err:
            raise RecordExists("assistant", assistant_id) from err
        return _record(row)

    async def get(self, assistant_id: str) -> AssistantRecord | None:
        async with self._db.query() as conn:  # every turn asks (the registry): a Core read
            row = (await conn.execute(_ONE, {"p_id": assistant_id})).first()
        return None if row is None else _record(row)

    async def all_ids(self) -> set[str]:
        """The id of every assistant created over the API (no limit: reconcile needs them all)."""
        async with self._db.read() as tx:
            return set(await tx.scalars(select(AssistantRow.id)))

    async def list(self, *, owner: str | None = None, limit: int = 100) -> list[AssistantRecord]:
        """Assistants by id, all of them or one owner's."""
        query = select(AssistantRow).order_by(AssistantRow.id).limit(min(max(limit, 1), _MAX_LIST))
        if owner is not None:
            query = query.where(AssistantRow.owner == owner)
        async with self._db.read() as tx:
            return [_record(row) for row in await tx.scalars(query)]

    async def replace(
        self,
        assistant_id: str,
        *,
        package: Mapping[str, JsonValue],
        prompts: JsonValue = None,
        sandbox: Mapping[str, JsonValue] | None = None,
    ) -> AssistantRecord:
        """Replace the documents (PUT semantics: a None sandbox removes it); owner and creation stay.

        Raises:
            RecordNotFound: no such assistant.
        """
        async with self._db.write() as tx:
            row = await tx.get(AssistantRow, assistant_id, with_for_update=True)
            if row is None:
                raise RecordNotFound("assistant", assistant_id)
            row.package = dict(package)
            row.prompts = prompts if prompts is not None else []
            row.sandbox = dict(sandbox) if sandbox is not None else None
            row.updated_at = self._db.clock()
            return _record(row)

    async def delete(self, assistant_id: str) -> bool:
        """False when there was no such assistant."""
        async with self._db.write() as tx:
            result = await tx.execute(delete(AssistantRow).where(AssistantRow.id == assistant_id))
            return bool(affected(result))
