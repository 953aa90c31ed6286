"""The rows that let several `cage serve` replicas share one database (revision 0005).

* `replicas`: one row per live process, its lease renewed by its heartbeat;
* `turn_leases`: which replica runs the running turn of a session (one per session: admission);
* `leader_leases`: which replica runs the cluster's maintenance (reaper, reconcile, recovery).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from orchestrator.store.tables import Base


class ReplicaRow(Base):
    """A `cage serve` process: alive while `expires_at` is ahead (its heartbeat moves it)."""

    __tablename__ = "replicas"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime]
    expires_at: Mapped[datetime] = mapped_column(index=True)


class TurnLeaseRow(Base):
    """The running turn of a session and the replica running it; gone when the turn's end is written.

    `session_id` is unique: a session runs one turn at a time across every replica. `expires_at` moves
    with the owner's heartbeat; None for a turn no heartbeat keeps (a `cage run` process), which
    only a server's start-up recovery closes.
    """

    __tablename__ = "turn_leases"

    turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), unique=True)
    replica_id: Mapped[str] = mapped_column(String(64), index=True)
    expires_at: Mapped[datetime | None] = mapped_column(index=True)
    created_at: Mapped[datetime]


class LeaderLeaseRow(Base):
    """A named job only one replica runs at a time: held by `replica_id` until `expires_at`."""

    __tablename__ = "leader_leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    replica_id: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime]
