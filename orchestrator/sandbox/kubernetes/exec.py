"""`KubeExecHandle`: one process started over the pods/exec subresource (a websocket).

The channel protocol (`v5.channel.k8s.io`, Kubernetes >= 1.30; `v4` without closing stdin): every
binary message starts with its channel byte: 0 stdin, 1 stdout, 2 stderr, 3 the final status (a
`Status` object: Success, or NonZeroExitCode with the code), 255 a close (`[255, 0]` closes stdin).

As on Docker, the command runs under `setsid -w sh -c 'echo <marker> $$; ...'`, so it has a process
group of its own whose id the handle reads from the first stdout line and keeps in memory;
`signal()` runs `kill -- -<pgid>` in a second exec (same user, no capability needed).
pods/exec has no user, environment or working directory: execs run as the pod's user, and the
wrapper sets the directory and the environment before `exec`.
"""

from __future__ import annotations

import contextlib
import enum
import json
import signal as signals
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Self

import anyio

from orchestrator.errors import SandboxError
from orchestrator.sandbox.backend import ExecItem
from orchestrator.sandbox.capture import HeadTailCapture
from orchestrator.sandbox.framer import LineFramer

PGID_MARKER = b"cage-exec-pgid"
WRAPPER = (
    f'if [ -n "$1" ]; then cd -- "$1" || exit 126; fi; shift; echo "{PGID_MARKER.decode()} $$"; exec env "$@"'
)
"""$1: the working directory (empty: the pod's); then NAME=VALUE words and the command (env(1))."""
STDIN, STDOUT, STDERR, STATUS, CLOSE = 0, 1, 2, 3, 255
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")


def wrap_argv(argv: tuple[str, ...], *, env: Mapping[str, str], workdir: str) -> list[str]:
    """The command that runs `argv` in its own process group, in `workdir`, with `env`."""
    words = [f"{k}={v}" for k, v in sorted(env.items())]
    return ["setsid", "-w", "sh", "-c", WRAPPER, "cage-exec", workdir, *words, *argv]


def signal_argv(pgid: int, sig: signals.Signals) -> list[str]:
    """A command delivering `sig` to the process group `pgid`."""
    return ["sh", "-c", 'kill -s "$1" -- "-$2"', "cage-signal", sig.name.removeprefix("SIG"), str(pgid)]


def exit_code(status: bytes) -> int:
    """The exit code a channel-3 `Status` message reports (-1 when it names none)."""
    try:
        data = json.loads(status)
    except ValueError:
        return -1
    if not isinstance(data, dict):
        return -1
    if data.get("status") == "Success":
        return 0
    for cause in (data.get("details") or {}).get("causes") or []:
        if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
            with contextlib.suppress(TypeError, ValueError):
                return int(cause.get("message", ""))
    return -1


class _State(enum.Enum):
    RUNNING = "running"
    EXITED = "exited"
    CLOSED = "closed"


class KubeExecHandle:
    """An `ExecHandle` over an aiohttp websocket to pods/exec. Create it with `KubernetesBackend.exec`."""

    def __init__(
        self,
        *,
        sandbox_id: str,
        ws: Any,
        send_signal: Callable[[int, signals.Signals], Awaitable[None]],
        max_line_bytes: int,
        stderr_keep_bytes: int,
        grace: float,
    ) -> None:
        self.sandbox_id = sandbox_id
        self._ws = ws
        self._send_signal = send_signal
        self._framer = LineFramer(max_line_bytes)
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

    @property
    def pgid(self) -> int | None:
        return self._pgid

    def __aiter__(self) -> AsyncIterator[ExecItem]:
        if self._iterating:
            raise RuntimeError("an exec handle can be iterated only once")
        self._iterating = True
        return self._lines()

    async def read_pgid(self) -> None:
        """Read the wrapper's first line (the group id); what follows is kept for the iterator."""
        while self._pgid is None and not self._eof and not self._pending:
            items = await self._receive()
            first = items[0] if items else None
            if isinstance(first, bytes) and first.startswith(PGID_MARKER + b" "):
                with contextlib.suppress(ValueError):
                    self._pgid = int(first[len(PGID_MARKER) + 1 :])
                self._pending.extend(items[1:])
                return
            self._pending.extend(items)

    async def _lines(self) -> AsyncIterator[ExecItem]:
        while not self._eof or self._pending:
            if self._pending:
                items, self._pending = self._pending, []
            else:
                items = await self._receive()
            for item in items:
                yield item

    async def _receive(self) -> list[ExecItem]:
        """One websocket message, routed: stdout lines returned, stderr captured, status kept."""
        if self._eof:
            return []
        import aiohttp

        try:
            msg = await self._ws.receive()
        except (OSError, RuntimeError, aiohttp.ClientError):
            msg = None
        if msg is None or msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
            if msg is not None and msg.type == aiohttp.WSMsgType.TEXT:
                return []
            self._eof = True
            return list(self._framer.close())
        channel, payload = msg.data[0], bytes(msg.data[1:])
        if channel == STDOUT:
            return list(self._framer.feed(payload))
        if channel == STDERR:
            self._stderr.write(payload)
        elif channel == STATUS:
            self._exit_code = exit_code(payload)
            if self._state is _State.RUNNING:
                self._state = _State.EXITED
        return []

    def _v5(self) -> bool:
        """Whether the server chose v5 (aiohttp records a protocol only when it asked for one itself,
        so the handshake's answer header is read too)."""
        chosen = getattr(self._ws, "protocol", None)
        response = getattr(self._ws, "_response", None)
        if not chosen and response is not None:
            chosen = response.headers.get("Sec-WebSocket-Protocol")
        return bool(chosen == PROTOCOLS[0])

    async def write_stdin(self, data: bytes) -> None:
        if not self._stdin_open or self._state is _State.CLOSED:
            raise SandboxError(self.sandbox_id, "stdin of this exec is closed")
        try:
            for start in range(0, len(data), 1 << 20):
                await self._ws.send_bytes(bytes([STDIN]) + data[start : start + (1 << 20)])
        except (OSError, RuntimeError, ConnectionError) as exc:
            raise SandboxError(self.sandbox_id, f"cannot write to stdin: {exc}") from exc

    async def close_stdin(self) -> None:
        if not self._stdin_open:
            return
        self._stdin_open = False
        if not self._v5():
            raise SandboxError(
                self.sandbox_id,
                "this API server cannot close an exec's stdin (needs v5.channel.k8s.io, 1.30+)",
            )
        with contextlib.suppress(OSError, RuntimeError, ConnectionError):
            await self._ws.send_bytes(bytes([CLOSE, STDIN]))

    async def signal(self, sig: signals.Signals) -> None:
        if self._pgid is not None:
            await self._send_signal(self._pgid, sig)

    async def wait(self) -> int:
        self._pending.clear()
        while not self._eof:
            await self._receive()
        return -1 if self._exit_code is None else self._exit_code

    async def aclose(self) -> None:
        """Idempotent, bounded: SIGTERM the group, SIGKILL after the grace period, close the socket."""
        if self._state is _State.CLOSED:
            return
        running = self._state is _State.RUNNING and not self._eof
        self._state = _State.CLOSED
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._grace + 5.0):
            if running:
                await self._terminate()
        with anyio.CancelScope(shield=True), anyio.move_on_after(2.0), contextlib.suppress(Exception):
            await self._ws.close()

    async def _terminate(self) -> None:
        await self.signal(signals.SIGTERM)
        if await self._ended_within(self._grace):
            return
        await self.signal(signals.SIGKILL)
        await self._ended_within(2.0)

    async def _ended_within(self, seconds: float) -> bool:
        """Read (and drop) output until the status arrives or the stream ends."""
        with anyio.move_on_after(seconds):
            while not self._eof and self._exit_code is None:
                await self._receive()  # nobody reads any more: dropped
            return True
        return False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
