"""`SessionEmitter`: the one place that stamps `seq`, `ts`, `session_id` and `turn_id` on events."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from orchestrator.errors import ProtocolError
from orchestrator.redaction import redact_model
from orchestrator.stream.events import Event


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class SessionEmitter:
    """Stamps the events of one session: `seq` gap-free and increasing across turns, `ts` never
    decreasing (a wall clock stepping back is clamped to the last stamp).

    A session reloaded from the event log resumes with `SessionEmitter.resume(id, last_seq, last_ts)`.
    Stamping is synchronous and holds no lock: one session's events are produced by one task.
    """

    def __init__(
        self,
        session_id: str,
        *,
        next_seq: int = 1,
        last_ts: int = 0,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        if next_seq < 1:
            raise ValueError(f"next_seq must be at least 1, got {next_seq}")
        self._session_id = session_id
        self._next_seq = next_seq
        self._last_ts = last_ts
        self._clock = clock

    @classmethod
    def resume(
        cls, session_id: str, last_seq: int, *, last_ts: int = 0, clock: Callable[[], int] = wall_clock_ms
    ) -> SessionEmitter:
        """An emitter continuing after the last stored event (`last_seq` 0: an empty session)."""
        return cls(session_id, next_seq=last_seq + 1, last_ts=last_ts, clock=clock)

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def next_seq(self) -> int:
        return self._next_seq

    @property
    def last_seq(self) -> int:
        """The seq of the last stamped event; 0 before the first."""
        return self._next_seq - 1

    @property
    def last_ts(self) -> int:
        return self._last_ts

    def stamp(self, event: Event, *, turn_id: str) -> Event:
        """A copy of `event` with its envelope filled in and its props redacted.

        Every event leaving Cage (log, websocket, SSE, OpenAI chunks, `cage run`) is stamped here,
        so this is the redactor's last line: text, thinking, tool inputs and outputs, message
        content. It is not the defence (keys never enter a sandbox; see docs/security.md): a
        secret split across two deltas or encoded by the agent passes.

        Raises:
            ProtocolError: the event was stamped already (a replayed event must not be renumbered).
        """
        if event.seq != 0:
            raise ProtocolError([f"event already stamped with seq {event.seq}"])
        ts = max(self._clock(), self._last_ts)
        stamped = event.model_copy(
            update={
                "seq": self._next_seq,
                "ts": ts,
                "session_id": self._session_id,
                "turn_id": turn_id,
                "props": redact_model(event.props),
            }
        )
        self._next_seq += 1
        self._last_ts = ts
        return stamped

    def stamp_all(self, events: Iterable[Event], *, turn_id: str) -> list[Event]:
        return [self.stamp(e, turn_id=turn_id) for e in events]
