"""`run_to_end`: read a started exec to its end under a time limit, keeping at most a cap of
its output. The one copy for every caller that runs a command to completion: the native loop's
tools (`LeaseToolSandbox`), prepare steps, the admin API's exec and a hook's `ctx.sandbox.exec`.
"""

from __future__ import annotations

import contextlib
import signal
from dataclasses import dataclass

import anyio

from orchestrator.errors import SandboxError, StreamLimitError
from orchestrator.sandbox.backend import ExecHandle

KILL_WAIT = 5.0
"""Seconds the SIGKILL of an overrunning command may take before we stop waiting for it."""


@dataclass(frozen=True, slots=True)
class FinishedExec:
    """What a command left when it ended, or when its time limit (or a cancel) cut it short."""

    exit_code: int | None
    """None: the time limit cut it and its process group was killed."""
    stdout: bytes
    """Its stdout lines, each ended by a newline, cut at the cap."""
    stderr: bytes
    """Its stderr (the backend's head and tail of it), cut at the cap."""
    truncated: bool
    """Output was dropped: past the cap, or a line longer than the backend's line cap."""
    timed_out: bool

    def lines(self) -> list[bytes]:
        """The stdout lines kept (the last one may be cut at the cap)."""
        return self.stdout.splitlines()


class _Head:
    """Keeps at most `cap` bytes of what is added; remembers whether anything was dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[bytes] = []
        self.kept = 0
        self.dropped = False

    def add(self, data: bytes) -> None:
        room = self.cap - self.kept
        if room > 0:
            self.parts.append(data[:room])
            self.kept += min(room, len(data))
        if len(data) > room:
            self.dropped = True

    def value(self) -> bytes:
        return b"".join(self.parts)


async def run_to_end(handle: ExecHandle, *, timeout: float | None, max_output: int) -> FinishedExec:  # noqa: ASYNC109 - the limit is the command's, not this call's
    """Read `handle` until the command exits or `timeout` seconds pass (None: no limit).

    On timeout, and when the caller is cancelled, the command's process group gets SIGKILL
    (shielded, bounded); the caller still closes the handle (`async with`).
    """
    out = _Head(max_output)
    exit_code: int | None = None
    try:
        with anyio.move_on_after(timeout) as scope:
            async for item in handle:
                if isinstance(item, StreamLimitError):
                    out.dropped = True
                    continue
                out.add(item + b"\n")
            exit_code = await handle.wait()
    finally:
        if exit_code is None:  # timed out, or the caller was cancelled
            await _kill(handle)
    err = _Head(max_output)
    err.add(handle.stderr)
    timed_out = scope.cancelled_caught
    return FinishedExec(
        exit_code=None if timed_out else exit_code,
        stdout=out.value(),
        stderr=err.value(),
        truncated=out.dropped or err.dropped,
        timed_out=timed_out,
    )


async def _kill(handle: ExecHandle) -> None:
    """SIGKILL to the command's process group, bounded and shielded (we may be cancelled)."""
    with (
        anyio.CancelScope(shield=True),
        anyio.move_on_after(KILL_WAIT),
        contextlib.suppress(SandboxError),
    ):
        await handle.signal(signal.SIGKILL)
