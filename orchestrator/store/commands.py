"""Steering commands between replicas: an interrupt or an answer for a turn another process runs.

The replica a client talks to (`send`) writes the command and wakes every replica with a notice on
`COMMANDS_CHANNEL`, in the same transaction. The replica holding the turn `claim`s it (a
compare-and-set on `claimed_by`: one claimant, ever), acts as on a local request, and writes the
outcome (`finish`), which wakes the sender on `OUTCOMES_CHANNEL`. A sender that hears nothing in
time `withdraw`s its command: that succeeds only while nobody has claimed it, so a command is
either acted on by its turn's owner and reported, or refused, never both. The sender deletes the
row once it has the outcome (`forget`); rows a dead sender left are swept by later sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update

from orchestrator.store.database import Database, affected
from orchestrator.store.notify import COMMANDS_CHANNEL, OUTCOMES_CHANNEL, notify
from orchestrator.store.tables import TurnCommandRow, TurnRow
from orchestrator.store.turns import RUNNING

KEEP = timedelta(minutes=10)
"""How long a command's row may outlive a sender that never came back for it."""


@dataclass(frozen=True, slots=True)
class TurnCommand:
    id: int
    session_id: str
    kind: str
    body: dict[str, Any]
    claimed_by: str | None
    outcome: dict[str, Any] | None


class CommandRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def turn_of(self, session_id: str) -> str | None:
        """The turn running in `session_id` on whichever replica runs it (its `turns` row is still
        `running`, written as the turn began); None when the session has none."""
        return (await self.turns_of([session_id])).get(session_id)

    async def turns_of(self, session_ids: Sequence[str]) -> dict[str, str]:
        """`turn_of` for many sessions in one query: session id to running turn id (sessions with
        none left out)."""
        if not session_ids:
            return {}
        query = (
            select(TurnRow.session_id, TurnRow.id)
            .where(TurnRow.session_id.in_(sorted(set(session_ids))), TurnRow.status == RUNNING)
            .order_by(TurnRow.created_at)
        )
        async with self._db.read() as tx:
            return {session_id: turn_id for session_id, turn_id in await tx.execute(query)}  # newest wins

    async def send(self, session_id: str, kind: str, body: dict[str, Any]) -> int:
        """Write a command for the turn of `session_id` and wake the replicas; returns its id."""
        now = self._db.clock()
        async with self._db.write() as tx:
            await tx.execute(delete(TurnCommandRow).where(TurnCommandRow.created_at < now - KEEP))
            command_id = await tx.scalar(
                insert(TurnCommandRow)
                .values(session_id=session_id, kind=kind, body=body, created_at=now)
                .returning(TurnCommandRow.id)
            )
            assert command_id is not None
            await notify(tx, COMMANDS_CHANNEL, [str(command_id)])
        return int(command_id)

    async def get(self, command_id: int) -> TurnCommand | None:
        async with self._db.read() as tx:
            row = await tx.get(TurnCommandRow, command_id)
            return _record(row) if row is not None else None

    async def unclaimed(self) -> list[TurnCommand]:
        """Commands nobody has claimed or withdrawn yet, oldest first (a listener that reconnects)."""
        query = (
            select(TurnCommandRow)
            .where(TurnCommandRow.claimed_by.is_(None), TurnCommandRow.outcome.is_(None))
            .order_by(TurnCommandRow.id)
        )
        async with self._db.read() as tx:
            return [_record(row) for row in await tx.scalars(query)]

    async def claim(self, command_id: int, replica: str) -> bool:
        """Take the command for `replica`; False when it was claimed or withdrawn before."""
        async with self._db.write() as tx:
            moved = await tx.execute(
                update(TurnCommandRow)
                .where(
                    TurnCommandRow.id == command_id,
                    TurnCommandRow.claimed_by.is_(None),
                    TurnCommandRow.outcome.is_(None),
                )
                .values(claimed_by=replica)
            )
        return affected(moved) == 1

    async def finish(self, command_id: int, outcome: dict[str, Any]) -> None:
        """Write the claimed command's outcome and wake its sender."""
        async with self._db.write() as tx:
            await tx.execute(
                update(TurnCommandRow).where(TurnCommandRow.id == command_id).values(outcome=outcome)
            )
            await notify(tx, OUTCOMES_CHANNEL, [str(command_id)])

    async def withdraw(self, command_id: int, outcome: dict[str, Any]) -> bool:
        """Give the command `outcome` unless someone claimed it; True when it is withdrawn."""
        async with self._db.write() as tx:
            moved = await tx.execute(
                update(TurnCommandRow)
                .where(TurnCommandRow.id == command_id, TurnCommandRow.claimed_by.is_(None))
                .values(outcome=outcome)
            )
        return affected(moved) == 1

    async def forget(self, command_id: int) -> None:
        async with self._db.write() as tx:
            await tx.execute(delete(TurnCommandRow).where(TurnCommandRow.id == command_id))


def _record(row: TurnCommandRow) -> TurnCommand:
    return TurnCommand(
        id=row.id,
        session_id=row.session_id,
        kind=row.kind,
        body=dict(row.body),
        claimed_by=row.claimed_by,
        outcome=dict(row.outcome) if row.outcome is not None else None,
    )
