"""`DockerExecHandle`: one process started with `docker exec`, read over the hijacked socket.

The command runs under a tiny wrapper: `setsid -w sh -c 'echo <marker> $$; exec "$@"'`. `setsid`
gives it a fresh process group, and the wrapper prints the group id as the very first stdout
line, before the command can print anything. The handle reads that line itself (the caller never
sees it) and keeps the id in the orchestrator's memory, so `signal()` reaches the whole group (an
exec as the same user runs `kill -- -<pgid>`, which needs no capability) without any control file
the agent could rewrite. Processes that leave the group (`setsid`, `nohup ... &` with a new
session) are not the handle's business: `SandboxManager` kills them when the box goes idle.
"""

from __future__ import annotations

import contextlib
import enum
import select
import signal as signals
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from io import BufferedReader
from types import TracebackType
from typing import Any, Self

import anyio
from anyio import to_thread

from orchestrator.errors import SandboxError
from orchestrator.sandbox.backend import ExecItem
from orchestrator.sandbox.capture import HeadTailCapture
from orchestrator.sandbox.docker.frames import STDERR, FrameDecoder
from orchestrator.sandbox.framer import LineFramer

READ_SIZE = 1024 * 1024
PGID_MARKER = b"cage-exec-pgid"
WRAPPER = f'echo "{PGID_MARKER.decode()} $$"; exec "$@"'


def wrap_argv(argv: tuple[str, ...]) -> list[str]:
    """The argv that runs `argv` in its own process group and prints the group id first."""
    return ["setsid", "-w", "sh", "-c", WRAPPER, "cage-exec", *argv]


def signal_script(pgid: int, sig: signals.Signals) -> list[str]:
    """A command delivering `sig` to the process group `pgid` (run as the group's user)."""
    return ["sh", "-c", 'kill -s "$1" -- "-$2"', "cage-signal", sig.name.removeprefix("SIG"), str(pgid)]


class _State(enum.Enum):
    RUNNING = "running"
    EXITED = "exited"
    CLOSED = "closed"


class DockerExecHandle:
    """An `ExecHandle` over a raw Docker exec socket. Create it with `DockerBackend.exec`."""

    def __init__(
        self,
        *,
        sandbox_id: str,
        raw_sock: Any,
        reader: BufferedReader,
        keepalive: Any,
        inspect: Callable[[], Awaitable[dict[str, Any]]],
        send_signal: Callable[[int, signals.Signals], Awaitable[None]],
        limiter: anyio.CapacityLimiter,
        max_line_bytes: int,
        stderr_keep_bytes: int,
        grace: float,
    ) -> None:
        self.sandbox_id = sandbox_id
        self._sock = raw_sock
        self._reader = reader
        self._keepalive = keepalive  # the HTTP response: dropping it may close the socket
        self._inspect = inspect
        self._send_signal = send_signal
        self._limiter = limiter
        self._framer = LineFramer(max_line_bytes)
        self._decoder = FrameDecoder()
        self._stderr = HeadTailCapture(stderr_keep_bytes)
        self._grace = grace
        self._state = _State.RUNNING
        self._eof = False
        self._stdin_open = True
        self._exit_code: int | None = None
        self._iterating = False
        self._pgid: int | None = None
        self._pending: list[ExecItem] = []

    @property
    def stderr(self) -> bytes:
        return self._stderr.getvalue()

    def __aiter__(self) -> AsyncIterator[ExecItem]:
        self._iterate_once()
        return self._lines()

    def batches(self) -> AsyncIterator[list[ExecItem]]:
        """The items of each socket read together (`BatchedExec`)."""
        self._iterate_once()
        return self._batches()

    def _iterate_once(self) -> None:
        if self._iterating:
            raise RuntimeError("an exec handle can be iterated only once")
        self._iterating = True

    @property
    def pgid(self) -> int | None:
        """The process group of the exec (None when the wrapper never reported it)."""
        return self._pgid

    async def read_pgid(self) -> None:
        """Read the wrapper's first line (the group id); what follows is kept for the iterator."""
        while self._pgid is None and not self._eof and not self._pending:
            items = await self._read_items(raw=True)
            first = items[0] if items else None
            if isinstance(first, bytes) and first.startswith(PGID_MARKER + b" "):
                with contextlib.suppress(ValueError):
                    self._pgid = int(first[len(PGID_MARKER) + 1 :])
                items = items[1:]
                self._pending.extend(items)
                return
            self._pending.extend(items)

    async def read_marked(self, marker: bytes) -> bytes | None:
        """The rest of the next stdout line when it is `marker`, a space and a value (taken from
        the stream: the caller's, never the iterator's); None, the line kept, when it is not."""
        while not self._pending and not self._eof:
            self._pending.extend(await self._read_items(raw=True))
        first = self._pending[0] if self._pending else None
        if isinstance(first, bytes) and first.startswith(marker + b" "):
            del self._pending[0]
            return first[len(marker) + 1 :]
        return None

    async def _lines(self) -> AsyncIterator[ExecItem]:
        while not self._eof or self._pending:
            for item in await self._read_items():
                yield item

    async def _batches(self) -> AsyncIterator[list[ExecItem]]:
        while not self._eof or self._pending:
            items = await self._read_items()
            if items:
                yield items

    async def _read_items(self, *, raw: bool = False) -> list[ExecItem]:
        if not raw and self._pending:
            items, self._pending = self._pending, []
            return items
        if self._state is _State.CLOSED:
            self._eof = True
            return []
        try:
            chunk = await to_thread.run_sync(self._read_ready, limiter=self._limiter, abandon_on_cancel=True)
        except (OSError, ValueError):  # socket shut down by aclose() while we were reading
            chunk = b""
        if not chunk:
            self._eof = True
            return list(self._framer.close())
        out: list[ExecItem] = []
        for stream, payload in self._decoder.feed(chunk):
            if stream == STDERR:
                self._stderr.write(payload)
            else:
                out.extend(self._framer.feed(payload))
        return out

    def _read_ready(self) -> bytes:
        """One blocking read, then whatever else the socket holds already, up to `READ_SIZE`.

        Each read is a hop to a worker thread and back; on a busy host a hop waits for the
        scheduler, so a fast CLI's output is taken in as few of them as it arrives in.
        """
        chunk = self._reader.read1(READ_SIZE)
        if not chunk:
            return chunk
        parts, size = [chunk], len(chunk)
        ready = select.poll()  # not select(): a server's descriptors pass FD_SETSIZE
        ready.register(self._sock, select.POLLIN)
        while size < READ_SIZE and ready.poll(0):
            more = self._reader.read1(READ_SIZE - size)
            if not more:
                break  # EOF: the next read reports it
            parts.append(more)
            size += len(more)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def write_stdin(self, data: bytes) -> None:
        if not self._stdin_open or self._state is _State.CLOSED:
            raise SandboxError(self.sandbox_id, "stdin of this exec is closed")
        try:
            await to_thread.run_sync(self._sock.sendall, data, limiter=self._limiter, abandon_on_cancel=True)
        except OSError as exc:  # the process exited and the engine closed its stdin
            raise SandboxError(self.sandbox_id, f"cannot write to stdin: {exc.strerror or exc}") from exc

    async def close_stdin(self) -> None:
        if not self._stdin_open:
            return
        self._stdin_open = False
        with contextlib.suppress(OSError):  # already gone: nothing left to close
            self._sock.shutdown(socket.SHUT_WR)

    async def signal(self, sig: signals.Signals) -> None:
        if self._pgid is not None:
            await self._send_signal(self._pgid, sig)

    async def wait(self) -> int:
        self._pending.clear()
        while not self._eof:
            await self._read_items()
        return await self._exit_status(within=10.0)

    async def _running(self) -> bool:
        info = await self._inspect()
        if not info.get("Running") and info.get("ExitCode") is not None:
            self._exit_code = int(info["ExitCode"])
            self._state = _State.EXITED if self._state is _State.RUNNING else self._state
            return False
        return bool(info.get("Running"))

    async def _exit_status(self, *, within: float) -> int:
        if self._exit_code is not None:
            return self._exit_code
        with anyio.move_on_after(within):
            while await self._running():  # noqa: ASYNC110 - the engine has no exit event: poll
                await anyio.sleep(0.01)
        if self._exit_code is None:
            return -1
        return self._exit_code

    async def aclose(self) -> None:
        """Idempotent, bounded: SIGTERM the group, SIGKILL after the grace period, close the socket."""
        if self._state is _State.CLOSED:
            return
        was_exited = self._state is _State.EXITED
        self._state = _State.CLOSED
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._grace + 5.0):
            if not was_exited and self._exit_code is None and await self._running():
                await self._terminate()
        self._shutdown_socket()

    async def _terminate(self) -> None:
        await self.signal(signals.SIGTERM)
        if await self._exited_within(self._grace):
            return
        await self.signal(signals.SIGKILL)
        await self._exited_within(2.0)

    async def _exited_within(self, seconds: float) -> bool:
        with anyio.move_on_after(seconds):
            while await self._running():  # noqa: ASYNC110 - the engine has no exit event: poll
                await anyio.sleep(0.05)
            return True
        return False

    def _shutdown_socket(self) -> None:
        with contextlib.suppress(OSError):  # already closed by the peer
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._keepalive.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
