"""`StdioGate`: tai's permission gate inside the container — it asks the host over stdout/stdin.

`check`/`ask` print a control line (`runners.tai.control`) through the same writer as the
protocol events and wait for the answer line with that id; `read_answers` feeds stdin's lines
to the waiting calls. When stdin ends (the bridge closed it, or the host went away) every
waiting call and every later one is refused (a question: no answer) — tai never runs a tool
nobody approved.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from typing import BinaryIO

import anyio
import anyio.from_thread
import anyio.lowlevel
import structlog

from orchestrator.permissions import Decision, Question, ToolRequest
from runners.tai.control import AnswerLine, parse_answer, permission_line, question_line

log = structlog.get_logger(__name__)

WriteLine = Callable[[str], Awaitable[None]]
NO_HOST = "refused: the host stopped answering"
READ_CHUNK = 65536
MAX_LINE = 1 << 20
"""An answer line longer than this is dropped (answers are a few hundred bytes)."""


class StdioGate:
    """The `PermissionGate` of an asking tai turn (see the module docstring)."""

    def __init__(self, write: WriteLine) -> None:
        self._write = write
        self._waiting: dict[str, anyio.Event] = {}
        self._answers: dict[str, AnswerLine] = {}
        self._count = 0
        self._closed = False

    @property
    def asks(self) -> bool:
        return True

    async def check(self, request: ToolRequest) -> Decision:
        answer = await self._round_trip("p", lambda request_id: permission_line(request_id, request))
        if answer is None or answer.allow is None:
            return Decision(allow=False, by="policy", message=NO_HOST)
        return answer.decision()

    async def ask(self, question: Question) -> str:
        answer = await self._round_trip("q", lambda request_id: question_line(request_id, question))
        return (answer.answer or "") if answer is not None else ""

    async def _round_trip(self, prefix: str, line: Callable[[str], str]) -> AnswerLine | None:
        """Print the control line for a new id and wait for its answer (None: stdin ended)."""
        if self._closed:
            return None
        self._count += 1
        request_id = f"{prefix}{self._count}"
        done = anyio.Event()
        self._waiting[request_id] = done
        try:
            await self._write(line(request_id))
            await done.wait()
        finally:
            self._waiting.pop(request_id, None)
        return self._answers.pop(request_id, None)

    def feed(self, raw: bytes) -> None:
        """One stdin line: the answer to a waiting call (others are ignored)."""
        answer = parse_answer(raw)
        if answer is None or answer.id not in self._waiting:
            log.warning("tai.gate_unexpected_line", size=len(raw))
            return
        self._answers[answer.id] = answer
        self._waiting[answer.id].set()

    def close(self) -> None:
        """stdin ended: refuse everything waiting and everything to come."""
        self._closed = True
        for done in self._waiting.values():
            done.set()

    async def read_answers(self, stream: BinaryIO) -> None:
        """Feed the lines of `stream`'s file descriptor until it ends, then `close()`.

        A daemon thread reads the descriptor with `os.read`, never through the buffered
        `sys.stdin`: a thread blocked in a buffered read holds its lock, and the interpreter
        aborts when it finalises stdin at exit. (Nothing is lost to the buffer `read_turn` used:
        the host writes the first answer only after tai printed a control line.)
        """
        fd = stream.fileno()
        token = anyio.lowlevel.current_token()
        ended = anyio.Event()

        def pump() -> None:
            pending = b""
            # OSError: a closed descriptor; RuntimeError: tai's event loop is gone.
            with contextlib.suppress(OSError, RuntimeError):
                while chunk := os.read(fd, READ_CHUNK):
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for raw in lines:
                        anyio.from_thread.run_sync(self.feed, raw, token=token)
                    if len(pending) > MAX_LINE:
                        pending = b""  # a runaway line is no answer
            with contextlib.suppress(RuntimeError):
                anyio.from_thread.run_sync(ended.set, token=token)

        threading.Thread(target=pump, name="cage-tai-stdin", daemon=True).start()
        await ended.wait()
        self.close()
