"""Start-up recovery: close the turns a previous process never finished.

A turn writes a `running` row and the user's messages when it starts (`TurnRecorder.begin`); a
row still `running` when a process starts belongs to a process that died mid-turn (`kill -9`, an
OOM, a power cut). Its log then ends somewhere inside the turn. Recovery appends what a client
needs to see the turn over: every message window still open is closed, every nested call still
open ends, then an `error` event (code `orchestrator_restarted`) and the root `stream_end`
(status `error`), written with the row's new status in one transaction. The session can take its
next turn at once: the user's message is in its history and the runner's resume state on the session.
An LLM-mode turn that saved a checkpoint (a tool round done) is resumed by the session's next message
from there (`orchestrator.pipeline.modes.llm_checkpoints`); the error's `details.resume_round` says so.

Processes the dead turn left running in re-adopted sandboxes are killed right after reconcile,
before the server accepts a turn (`kill_orphaned_turns`, with the turns this returns).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import structlog
from pydantic import JsonValue

from orchestrator.errors import CageError
from orchestrator.pipeline.hub import SessionHub
from orchestrator.store import Store
from orchestrator.stream import (
    ErrorEvent,
    ErrorProps,
    Event,
    LifecycleEvent,
    MessageEnd,
    MessageStart,
    StreamEnd,
    StreamStart,
)

log = structlog.get_logger(__name__)

RESTARTED = "orchestrator_restarted"
"""The `error` code (and `stream_end` reason) of a turn the orchestrator's restart cut short."""
RESTARTED_MESSAGE = "the orchestrator restarted while this turn was running; the turn did not finish"


def closing_events(logged: list[Event], resume_round: int | None = None) -> list[Event]:
    """The events that close a turn whose log is `logged` (unstamped, in order). `resume_round`:
    the turn's last checkpoint (LLM mode), which the session's next message resumes from; it goes in
    the error's `details`."""
    windows: dict[tuple[str | None, str], MessageStart] = {}
    threads: list[str] = []
    for event in logged:
        if not isinstance(event, LifecycleEvent):
            continue
        props = event.props
        if isinstance(props, MessageStart):
            windows[(event.thread_id, props.message_id)] = props
        elif isinstance(props, MessageEnd):
            windows.pop((event.thread_id, props.message_id), None)
        elif isinstance(props, StreamStart) and event.thread_id is not None:
            threads.append(event.thread_id)
        elif isinstance(props, StreamEnd) and event.thread_id in threads:
            threads.remove(event.thread_id)
    closing: list[Event] = [
        LifecycleEvent(
            thread_id=thread, props=MessageEnd(message_id=start.message_id, type=start.type, status="error")
        )
        for (thread, _), start in windows.items()
    ]
    closing += [
        LifecycleEvent(thread_id=thread, props=StreamEnd(status="error", error=RESTARTED_MESSAGE))
        for thread in reversed(threads)
    ]
    details: dict[str, JsonValue] | None = None if resume_round is None else {"resume_round": resume_round}
    closing.append(ErrorEvent(props=ErrorProps(message=RESTARTED_MESSAGE, code=RESTARTED, details=details)))
    closing.append(LifecycleEvent(props=StreamEnd(status="error", error=RESTARTED_MESSAGE)))
    return closing


@dataclass(frozen=True)
class RecoveredTurn:
    """A turn start-up recovery closed: where its processes may still run."""

    turn_id: str
    session_id: str
    assistant_id: str
    owner: str


async def close_unfinished_turns(store: Store, only: Collection[str] | None = None) -> list[RecoveredTurn]:
    """Close every turn left `running` (with `only`: those of these ids); returns them. A turn that
    cannot be closed now (the database failing) is logged and left for the next start."""
    hub = SessionHub(store)
    closed: list[RecoveredTurn] = []
    for turn in await store.turns.unfinished():
        if only is not None and turn.id not in only:
            continue
        try:
            if await _close(hub, store, turn.session_id, turn.id):
                session = await store.sessions.get(turn.session_id)
                owner = session.owner if session is not None else ""
                closed.append(RecoveredTurn(turn.id, turn.session_id, turn.assistant_id, owner))
                log.warning(
                    "recovery.turn_closed", session_id=turn.session_id, turn_id=turn.id, code=RESTARTED
                )
        except CageError as exc:
            log.error("recovery.turn_not_closed", session_id=turn.session_id, turn_id=turn.id, error=str(exc))
    return closed


async def _close(hub: SessionHub, store: Store, session_id: str, turn_id: str) -> bool:
    logged = await store.events.of_turn(session_id, turn_id)
    checkpoint = await store.checkpoints.latest(turn_id)
    resume_round = None if checkpoint is None else checkpoint.round
    done: list[bool] = []

    async def commit(stamped: list[Event]) -> None:
        done.append(await store.turns.close_unfinished(session_id, turn_id, stamped))

    await hub.publish(session_id, turn_id, closing_events(logged, resume_round), commit=commit)
    return bool(done and done[0])
