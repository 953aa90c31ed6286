"""LLM mode's checkpoints in the store, and resuming a turn a crash cut short.

An LLM-mode turn saves the loop's state after each tool round (the `checkpoints` table, keyed by
turn id and round; the `tools` phase only: the model's step alone holds no work worth keeping).
A turn that ends, however it ends, drops its checkpoints. So a checkpoint still there after a
restart belongs to a turn the process died in (start-up recovery closes it and names the round
in its `orchestrator_restarted` error's `details.resume_round`).

The resume entry point is the session's next user message: when the session's previous turn was the
same assistant's, ended in `error` and left a checkpoint, the new turn starts from that
checkpoint's conversation (the completed tool rounds with their results) followed by the new
message, instead of the stored history. Its tools are not run again.
"""

from __future__ import annotations

import structlog
from pydantic import ValidationError

from orchestrator.llm import Checkpoint
from orchestrator.store import Store

log = structlog.get_logger(__name__)


class StoreCheckpoints:
    """A `CheckpointSink` on the store: tool rounds are saved, the end drops them all (and those
    of the turn this one resumed)."""

    def __init__(self, store: Store, *, resumed_from: str | None = None) -> None:
        self._store = store
        self._resumed_from = resumed_from
        self._saved: set[str] = set()
        """Turns this sink saved a checkpoint of: the only ones it has to drop (a turn's
        checkpoints are written by its own sink, so a turn without tool rounds costs no query)."""

    async def save(self, checkpoint: Checkpoint) -> None:
        if checkpoint.phase == "tools":
            payload = checkpoint.model_dump(mode="json")
            self._saved.add(checkpoint.turn_id)  # before the write: one that lands is dropped too
            await self._store.checkpoints.save(checkpoint.turn_id, checkpoint.round, payload)
        elif checkpoint.phase == "done":
            if checkpoint.turn_id in self._saved:
                await self._store.checkpoints.delete(checkpoint.turn_id)
                self._saved.discard(checkpoint.turn_id)
            if self._resumed_from is not None:
                await self._store.checkpoints.delete(self._resumed_from)


async def crashed_checkpoint(
    store: Store, session_id: str, turn_id: str, assistant_id: str
) -> Checkpoint | None:
    """The last checkpoint of the session's previous turn, when a crash cut that turn short (it is
    `assistant_id`'s, ended in `error` and still has one); None otherwise."""
    previous = await store.turns.previous(session_id, turn_id)
    if previous is None or previous.status != "error" or previous.assistant_id != assistant_id:
        return None
    record = await store.checkpoints.latest(previous.id)
    if record is None:
        return None
    try:
        return Checkpoint.model_validate(record.payload)
    except ValidationError as exc:  # written by another version: start the turn afresh
        log.warning("llm_resume.checkpoint_unreadable", turn_id=record.turn_id, error=str(exc))
        return None
