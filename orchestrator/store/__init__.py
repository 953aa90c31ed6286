"""Persistence: sessions, messages, the session event log, checkpoints, assistants, memory, API keys and
audit, on SQLite (default) or Postgres, behind the `Store` facade. Import from here.
"""

from orchestrator.store.errors import EventSequenceError, RecordExists, RecordNotFound, StoreError
from orchestrator.store.facade import Store
from orchestrator.store.memory import MemoryScope
from orchestrator.store.records import (
    AssistantRecord,
    AuditRecord,
    CheckpointRecord,
    FinishedTurn,
    KeyInfo,
    KeyRole,
    MemoryEntry,
    MemorySpace,
    MessageRecord,
    MessageRole,
    NewMessage,
    SessionRecord,
    TurnRecord,
    TurnSummary,
)

__all__ = [
    "AssistantRecord",
    "AuditRecord",
    "CheckpointRecord",
    "EventSequenceError",
    "FinishedTurn",
    "KeyInfo",
    "KeyRole",
    "MemoryEntry",
    "MemoryScope",
    "MemorySpace",
    "MessageRecord",
    "MessageRole",
    "NewMessage",
    "RecordExists",
    "RecordNotFound",
    "SessionRecord",
    "Store",
    "StoreError",
    "TurnRecord",
    "TurnSummary",
]
