"""Stage 2, history: the session's last messages put before the call's own."""

from __future__ import annotations

from orchestrator.pipeline.call import Call
from orchestrator.pipeline.contract import InputMessage
from orchestrator.store.messages import MAX_HISTORY


async def load_history(call: Call) -> None:
    """Prepend the session's last messages, unless the call is forked or history is skipped."""
    options = call.options
    if call.stack.forked or call.history_loaded or options.skip_history:
        return
    call.stage = "history"
    size = options.history_size if options.history_size is not None else call.assistant.history_size
    if size <= 0:
        return
    records = await call.scope.store.messages.history(
        call.scope.session_id, limit=min(size, MAX_HISTORY), exclude_turn=call.scope.turn_id
    )
    history = tuple(
        InputMessage(role=r.role, content=r.content if isinstance(r.content, str | list) else str(r.content))
        for r in records
    )
    call.messages = (*history, *call.messages)
    call.history_loaded = True
