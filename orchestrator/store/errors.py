"""Errors the store raises on purpose; all under `orchestrator.errors.CageError`.

CageError
├── StoreError           reason                  (the database cannot be reached or migrated)
├── Conflict
│   ├── EventSequenceError  session_id, expected, got   (a gap or a duplicate in the event log)
│   ├── RecordExists        record_kind, record_id
│   └── TurnRunning         session_id, turn_id, replica_id   (the session runs a turn already)
├── CapacityError
│   ├── OwnerTurnsRunning   scope, limit   (an owner's running turns, over every replica, at the cap)
│   └── OwnerSessionsFull      scope, limit   (an owner has as many sessions as the server allows)
└── NotFound
    └── RecordNotFound      record_kind, record_id

Messages never contain SQL parameters, memory values or key material.
"""

from __future__ import annotations

from orchestrator.errors import CageError, CapacityError, Conflict, ErrorKind, NotFound


class StoreError(CageError):
    """The database failed: unreachable, locked past the timeout, or a migration broke."""

    code = "store_unavailable"
    kind = ErrorKind.UNAVAILABLE

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"store: {reason}")


class EventSequenceError(Conflict):
    """Events offered to a session's log do not continue it: `got` is not `expected`."""

    code = "event_sequence_broken"

    def __init__(self, session_id: str, *, expected: int, got: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.got = got
        what = "duplicate" if got < expected else "gap"
        super().__init__(f"event log of session {session_id}: {what}: expected seq {expected}, got {got}")


class RecordExists(Conflict):
    """A record with this id exists already."""

    code = "record_exists"

    def __init__(self, kind: str, record_id: str) -> None:
        self.record_kind = kind
        self.record_id = record_id
        super().__init__(f"{kind} {record_id!r} already exists")


class TurnRunning(Conflict):
    """A turn cannot begin: the session runs `turn_id` already, on replica `replica_id`."""

    code = "turn_running"

    def __init__(self, session_id: str, turn_id: str, replica_id: str) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.replica_id = replica_id
        super().__init__(f"a turn is already running in session {session_id!r}")


class OwnerTurnsRunning(CapacityError):
    """An owner runs as many turns as its cap allows, counted over every replica (429)."""

    code = "owner_turns_running"

    def __init__(self, owner: str, limit: int) -> None:
        super().__init__(f"owner {owner} (all replicas)", limit, what="concurrent running turn")


class OwnerSessionsFull(CapacityError):
    """An owner has as many sessions as `CAGE_MAX_SESSIONS_PER_OWNER` allows; no session was created (429)."""

    code = "owner_sessions_full"

    def __init__(self, owner: str, limit: int) -> None:
        super().__init__(f"owner {owner}", limit, what="session")


class RecordNotFound(NotFound):
    """No record of this kind with this id."""

    code = "record_not_found"

    def __init__(self, kind: str, record_id: str) -> None:
        self.record_kind = kind
        self.record_id = record_id
        super().__init__(f"{kind} {record_id!r} not found")
