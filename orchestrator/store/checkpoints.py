"""Checkpoints of the native loop: one payload per (turn, round), the newest one resumes a turn."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue
from sqlalchemy import delete, select

from orchestrator.store.database import Database
from orchestrator.store.records import CheckpointRecord
from orchestrator.store.tables import CheckpointRow
from orchestrator.store.upsert import upsert


def _record(row: CheckpointRow) -> CheckpointRecord:
    return CheckpointRecord(
        turn_id=row.turn_id, round=row.round, payload=row.payload, created_at=row.created_at
    )


class CheckpointRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def save(self, turn_id: str, round: int, payload: Mapping[str, JsonValue]) -> CheckpointRecord:
        """Store the checkpoint of `round`, replacing one saved for the same round before."""
        now = self._db.clock()
        values = {"turn_id": turn_id, "round": round, "payload": dict(payload), "created_at": now}
        async with self._db.write() as tx:
            await upsert(tx, CheckpointRow, values, keys=("turn_id", "round"))
        return CheckpointRecord(turn_id=turn_id, round=round, payload=dict(payload), created_at=now)

    async def latest(self, turn_id: str) -> CheckpointRecord | None:
        """The checkpoint of the turn's highest round; None when it has none."""
        query = (
            select(CheckpointRow)
            .where(CheckpointRow.turn_id == turn_id)
            .order_by(CheckpointRow.round.desc())
            .limit(1)
        )
        async with self._db.read() as tx:
            row = await tx.scalar(query)
            return None if row is None else _record(row)

    async def of_turn(self, turn_id: str) -> list[CheckpointRecord]:
        """All the turn's checkpoints, by round."""
        query = select(CheckpointRow).where(CheckpointRow.turn_id == turn_id).order_by(CheckpointRow.round)
        async with self._db.read() as tx:
            return [_record(row) for row in await tx.scalars(query)]

    async def delete(self, turn_id: str) -> int:
        """Drop the turn's checkpoints (a finished turn needs none); returns how many went."""
        return await self._db.delete(delete(CheckpointRow).where(CheckpointRow.turn_id == turn_id))
