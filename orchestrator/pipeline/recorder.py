"""`TurnRecorder`: what a turn leaves in the store, written at its start and at its end.

`begin` writes a `running` turn row and the user's new messages before the turn runs, so a crash
loses neither (and start-up recovery knows the turn never ended). `persist` writes the answer in
the same transaction as the turn's closing events and its usage. Every earlier event is already in
the session log (the hub appends as it streams).
"""

from __future__ import annotations

import uuid

from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.contract import InputMessage, TurnInput
from orchestrator.redaction import redact
from orchestrator.store import FinishedTurn, NewMessage, Store
from orchestrator.stream import Event, Usage


def new_message_id() -> str:
    return f"msg-{uuid.uuid4().hex[:20]}"


def new_input(messages: tuple[InputMessage, ...]) -> tuple[InputMessage, ...]:
    """The request's new messages: those after its last assistant or tool message (OpenAI clients
    resend the whole conversation; only its tail is new)."""
    last = max((i for i, m in enumerate(messages) if m.role in ("assistant", "tool")), default=-1)
    return messages[last + 1 :]


class TurnRecorder:
    """Buffers one turn's messages and writes them with its last events."""

    def __init__(self, store: Store, turn: TurnInput, root_assistant_id: str) -> None:
        self._store = store
        self._turn = turn
        self._assistant_id = root_assistant_id
        self.inputs = tuple(
            NewMessage(id=new_message_id(), role=m.role, content=m.content, assistant_id=None)
            for m in new_input(turn.messages)
        )
        self._begun = False

    async def begin(self) -> None:
        """Write the `running` turn row and the user's messages.

        Raises:
            StoreError, RecordExists, RecordNotFound: nothing was written; the turn must not start.
        """
        turn = self._turn
        await self._store.turns.begin(
            turn.session_id, turn.turn_id, self._assistant_id, self.inputs, owner=turn.owner
        )
        self._begun = True

    def messages(self, result: CallResult) -> tuple[NewMessage, ...]:
        """The messages `persist` writes: the user's (unless `begin` wrote them) and the answer."""
        inputs = () if self._begun else self.inputs
        if not result.content:
            return inputs
        answer = NewMessage(
            id=new_message_id(),
            role="assistant",
            content=redact(result.content),  # the answer is stored and served again: the last line too
            assistant_id=result.assistant_id,
        )
        return (*inputs, answer)

    async def persist(self, stamped: list[Event], result: CallResult) -> None:
        """Write the turn: messages, the closing events, usage.

        Raises:
            StoreError, EventSequenceError, RecordExists: nothing was written.
        """
        usage = (result.usage or Usage()).model_copy(update={"scope": "turn"})
        await self._store.persist_turn(
            FinishedTurn(
                session_id=self._turn.session_id,
                turn_id=self._turn.turn_id,
                assistant_id=self._assistant_id,
                status=result.status,
                messages=self.messages(result),
                events=tuple(stamped),
                usage=usage,
            )
        )
