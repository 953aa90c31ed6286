"""Checks that a sequence of events keeps the rules of the stream protocol.

Used by every test that looks at a stream (translators, pipeline, API) and by `cage` tooling on a
JSONL log. The rules:

1. the events parse (dicts are parsed, so a JSONL file can be checked);
2. stamped streams: `seq` gap-free and increasing, `ts` never decreasing, one `session_id`;
3. per turn: a root `stream_start` first, exactly one root `stream_end`, nothing after it, and
   no turn starting while another is still open;
4. every `message_start` is closed by a `message_end` with the same id and type before the
   `stream_end`; no window is opened twice at once;
5. deltas (and any content event naming a message) only inside that message's open window;
6. nested calls: a `stream_start` with a `thread_id` opens the thread and a `stream_end` with it
   closes it, once each; events of a thread only while it is open; all threads closed before the
   root `stream_end`. Threads may interleave (parallel agent-to-agent calls);
7. permissions and questions: a `permission/request` id is used once and resolved by exactly one
   `permission/resolved` before the root `stream_end`; a `permission/resolved` by `user` or
   `timeout` answers an open request (one `by: policy` may stand alone: a rule's denial); the
   same for `question` and `question/answered`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from orchestrator.errors import ProtocolError
from orchestrator.stream.events import Event, parse_event
from orchestrator.stream.lifecycle import (
    LifecycleEvent,
    MessageEnd,
    MessageStart,
    PermissionRequest,
    PermissionResolved,
    QuestionAnswered,
    QuestionAsked,
    StreamEnd,
    StreamStart,
)


@dataclass
class _Turn:
    turn_id: str
    started: bool = False
    ended: bool = False
    open_messages: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """message_id -> (type, thread_id) of every open window."""
    open_threads: set[str] = field(default_factory=set)
    seen_threads: set[str] = field(default_factory=set)
    asked: dict[str, set[str]] = field(default_factory=lambda: {"permission": set(), "question": set()})
    """Request ids asked and not answered yet, by kind."""
    seen_asks: dict[str, set[str]] = field(default_factory=lambda: {"permission": set(), "question": set()})
    answered: dict[str, set[str]] = field(default_factory=lambda: {"permission": set(), "question": set()})


def _label(index: int, event: Event) -> str:
    kind = event.props.event if isinstance(event, LifecycleEvent) else event.type
    where = f"seq {event.seq}" if event.seq else f"#{index}"
    return f"event {where} ({kind})"


class _Checker:
    def __init__(self, *, stamped: bool) -> None:
        self.stamped = stamped
        self.problems: list[str] = []
        self.turns: dict[str, _Turn] = {}
        self.current: _Turn | None = None
        self.prev: Event | None = None
        self.session_id: str | None = None

    def check(self, index: int, event: Event) -> None:
        label = _label(index, event)
        if self.stamped:
            self._envelope(label, event)
        self.prev = event
        turn = self._turn(label, event)
        if turn.ended:
            self.problems.append(f"{label}: after the stream_end of turn {turn.turn_id!r}")
            return
        if not turn.started and not _is_root(event, StreamStart):
            self.problems.append(f"{label}: turn {turn.turn_id!r} does not begin with stream_start")
            turn.started = True
        self._thread(label, event, turn)
        if isinstance(event, LifecycleEvent):
            self._lifecycle(label, event, turn)
        else:
            self._content(label, event, turn)

    def finish(self, *, complete: bool) -> list[str]:
        if complete:
            for turn in self.turns.values():
                if not turn.ended:
                    self.problems.append(f"turn {turn.turn_id!r} has no stream_end")
        return self.problems

    def _envelope(self, label: str, event: Event) -> None:
        if event.seq < 1:
            self.problems.append(f"{label}: not stamped (seq {event.seq})")
        if self.prev is not None:
            if event.seq != self.prev.seq + 1:
                self.problems.append(f"{label}: seq follows {self.prev.seq}, expected {self.prev.seq + 1}")
            if event.ts < self.prev.ts:
                self.problems.append(f"{label}: ts {event.ts} is before the previous {self.prev.ts}")
        if self.session_id is None:
            self.session_id = event.session_id
        elif event.session_id != self.session_id:
            self.problems.append(f"{label}: session_id {event.session_id!r} differs from {self.session_id!r}")

    def _turn(self, label: str, event: Event) -> _Turn:
        turn = self.turns.get(event.turn_id)
        if turn is None:
            if self.current is not None and not self.current.ended:
                self.problems.append(
                    f"{label}: turn {event.turn_id!r} starts while {self.current.turn_id!r} is open"
                )
            turn = self.turns[event.turn_id] = _Turn(event.turn_id)
        elif turn is not self.current and not turn.ended:
            self.problems.append(f"{label}: turn {turn.turn_id!r} resumes after another turn")
        self.current = turn
        return turn

    def _thread(self, label: str, event: Event, turn: _Turn) -> None:
        thread = event.thread_id
        if thread is None or _is_thread_bracket(event, StreamStart):
            return
        if thread not in turn.open_threads:
            self.problems.append(f"{label}: thread {thread!r} is not open")

    def _lifecycle(self, label: str, event: LifecycleEvent, turn: _Turn) -> None:
        props = event.props
        thread = event.thread_id
        if isinstance(props, StreamStart):
            if thread is None:
                if turn.started:
                    self.problems.append(f"{label}: second stream_start in turn {turn.turn_id!r}")
                turn.started = True
            elif thread in turn.seen_threads:
                self.problems.append(f"{label}: thread {thread!r} started twice")
            else:
                turn.seen_threads.add(thread)
                turn.open_threads.add(thread)
        elif isinstance(props, StreamEnd):
            self._stream_end(label, thread, turn)
        elif isinstance(props, MessageStart):
            if props.message_id in turn.open_messages:
                self.problems.append(f"{label}: message {props.message_id!r} is already open")
            turn.open_messages[props.message_id] = (props.type, thread)
        elif isinstance(props, MessageEnd):
            opened = turn.open_messages.pop(props.message_id, None)
            if opened is None:
                self.problems.append(f"{label}: message {props.message_id!r} ends without message_start")
            elif opened[0] != props.type:
                self.problems.append(
                    f"{label}: message {props.message_id!r} opened as {opened[0]}, ends as {props.type}"
                )
        elif isinstance(props, PermissionRequest | QuestionAsked):
            self._asked(
                label,
                "permission" if isinstance(props, PermissionRequest) else "question",
                props.request_id,
                turn,
            )
        elif isinstance(props, PermissionResolved | QuestionAnswered):
            kind = "permission" if isinstance(props, PermissionResolved) else "question"
            self._answered(label, kind, props.request_id, props.by, turn)

    def _asked(self, label: str, kind: str, request_id: str, turn: _Turn) -> None:
        if request_id in turn.seen_asks[kind] or request_id in turn.answered[kind]:
            self.problems.append(f"{label}: {kind} request {request_id!r} is used twice")
            return
        turn.seen_asks[kind].add(request_id)
        turn.asked[kind].add(request_id)

    def _answered(self, label: str, kind: str, request_id: str, by: str, turn: _Turn) -> None:
        if request_id in turn.answered[kind]:
            self.problems.append(f"{label}: {kind} request {request_id!r} is resolved twice")
            return
        turn.answered[kind].add(request_id)
        if request_id in turn.asked[kind]:
            turn.asked[kind].discard(request_id)
        elif by != "policy":
            self.problems.append(f"{label}: {kind} request {request_id!r} was never asked")

    def _stream_end(self, label: str, thread: str | None, turn: _Turn) -> None:
        if thread is not None and thread not in turn.open_threads:
            return  # already reported by _thread
        still_open = sorted(m for m, (_, t) in turn.open_messages.items() if thread is None or t == thread)
        for message_id in still_open:
            self.problems.append(f"{label}: message {message_id!r} is still open")
            del turn.open_messages[message_id]
        if thread is None:
            for open_thread in sorted(turn.open_threads):
                self.problems.append(f"{label}: thread {open_thread!r} is still open")
            for kind, pending in turn.asked.items():
                for request_id in sorted(pending):
                    self.problems.append(f"{label}: {kind} request {request_id!r} is never resolved")
                pending.clear()
            turn.ended = True
        else:
            turn.open_threads.discard(thread)

    def _content(self, label: str, event: Event, turn: _Turn) -> None:
        if event.message_id is None:
            if event.delta:
                self.problems.append(f"{label}: delta without a message_id")
            return
        opened = turn.open_messages.get(event.message_id)
        if opened is None:
            self.problems.append(f"{label}: message {event.message_id!r} has no open window")
        elif opened[0] != event.type:
            self.problems.append(f"{label}: {event.type} content in {opened[0]} message {event.message_id!r}")


def _is_root(event: Event, kind: type[StreamStart] | type[StreamEnd]) -> bool:
    return isinstance(event, LifecycleEvent) and isinstance(event.props, kind) and event.thread_id is None


def _is_thread_bracket(event: Event, kind: type[StreamStart] | type[StreamEnd]) -> bool:
    return isinstance(event, LifecycleEvent) and isinstance(event.props, kind) and event.thread_id is not None


def validate_stream(
    events: Iterable[Event | Mapping[str, Any]], *, stamped: bool = True, complete: bool = True
) -> list[str]:
    """Every rule the events break, as readable lines; an empty list means a valid stream.

    `stamped=False` skips the envelope rules (seq, ts, session) for events straight from a builder
    or translator; `complete=False` accepts turns still open at the end (a live tail).
    """
    checker = _Checker(stamped=stamped)
    for index, item in enumerate(events):
        if isinstance(item, Mapping):
            try:
                event = parse_event(item)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                checker.problems.append(f"event #{index}: not a protocol event: {where}: {first['msg']}")
                checker.prev = None  # its seq is unknown: do not report a gap after it as well
                continue
        else:
            event = item
        checker.check(index, event)
    return checker.finish(complete=complete)


def check_stream(
    events: Iterable[Event | Mapping[str, Any]], *, stamped: bool = True, complete: bool = True
) -> None:
    """`validate_stream`, raising instead of returning.

    Raises:
        ProtocolError: with every problem found.
    """
    problems = validate_stream(events, stamped=stamped, complete=complete)
    if problems:
        raise ProtocolError(problems)
