"""Where coding tools run: the `ToolSandbox` Protocol and `LocalSandbox` (local subprocesses).

The yaocode runner implements `ToolSandbox` on the sandbox manager's exec (the container's work
dir is the root); the tai CLI and the tests use `LocalSandbox` on a directory. Paths given to
`read_file`/`write_file` are relative to the root (tools have checked them already).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import Protocol

import anyio
from anyio.abc import ByteReceiveStream, Process
from pydantic import BaseModel, ConfigDict

from orchestrator.errors import ToolError

DEFAULT_OUTPUT_CAP = 64 * 1024
_KILL_WAIT = 5.0


class CommandResult(BaseModel):
    """A finished command. `exit_code` is None when it was killed on timeout."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool = False
    """Some output was dropped: each stream keeps at most the cap the caller gave."""
    timed_out: bool = False


class ToolSandbox(Protocol):
    """The operations coding tools need from wherever the workspace lives."""

    @property
    def root(self) -> str:
        """The workspace root as commands see it (their working directory)."""
        ...

    async def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout: float,  # noqa: ASYNC109 - the contract: the sandbox kills the command itself
        max_output: int = DEFAULT_OUTPUT_CAP,
    ) -> CommandResult:
        """Run a command in the root; on timeout kill it (and its children) and say so."""
        ...

    async def read_file(self, path: str) -> bytes:
        """Raises `ToolError` when the file is missing or not readable."""
        ...

    async def write_file(self, path: str, data: bytes) -> None:
        """Create parent directories as needed. Raises `ToolError` on failure."""
        ...


async def _drain(stream: ByteReceiveStream | None, cap: int, into: list[bytes]) -> bool:
    """Read to EOF keeping at most `cap` bytes; True when something was dropped."""
    if stream is None:
        return False
    kept, dropped = 0, False
    async for chunk in stream:
        room = cap - kept
        if room > 0:
            into.append(chunk[:room])
            kept += min(room, len(chunk))
        if len(chunk) > room:
            dropped = True
    return dropped


def _kill_group(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class LocalSandbox:
    """`ToolSandbox` on this machine: subprocesses in their own process group, files under `root`."""

    def __init__(self, root: Path | str, *, env: dict[str, str] | None = None) -> None:
        self._root = Path(root).resolve()
        self._env = env

    @property
    def root(self) -> str:
        return str(self._root)

    async def _inside(self, path: str) -> Path:
        """The real path of `path`; symlinks may not lead out of the root."""
        target = Path(await anyio.Path(self._root / path).resolve())
        if not target.is_relative_to(self._root):
            raise ToolError("", f"path {path!r} resolves outside the workspace")
        return target

    async def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout: float,  # noqa: ASYNC109 - the contract: the sandbox kills the command itself
        max_output: int = DEFAULT_OUTPUT_CAP,
    ) -> CommandResult:
        out: list[bytes] = []
        err: list[bytes] = []
        truncated = timed_out = False
        try:
            process = await anyio.open_process(
                list(argv),
                stdin=PIPE if stdin is not None else DEVNULL,
                stdout=PIPE,
                stderr=PIPE,
                cwd=self._root,
                env=self._env,
                start_new_session=True,  # its own group: a timeout or cancel kills the children too
            )
        except OSError as exc:
            raise ToolError("", f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
        try:
            with anyio.move_on_after(timeout) as scope:
                async with anyio.create_task_group() as tg:

                    async def read(stream: ByteReceiveStream | None, into: list[bytes]) -> None:
                        nonlocal truncated
                        truncated = await _drain(stream, max_output, into) or truncated

                    tg.start_soon(read, process.stdout, out)
                    tg.start_soon(read, process.stderr, err)
                    if process.stdin is not None:
                        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                            await process.stdin.send(stdin or b"")
                        await process.stdin.aclose()
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            if process.returncode is None:
                _kill_group(process)
                with anyio.CancelScope(shield=True), anyio.move_on_after(_KILL_WAIT):
                    await process.wait()
            else:
                _kill_group(process)  # background children left behind by the command
            await process.aclose()
        return CommandResult(
            exit_code=None if timed_out else process.returncode,
            stdout=b"".join(out).decode("utf-8", "replace"),
            stderr=b"".join(err).decode("utf-8", "replace"),
            truncated=truncated,
            timed_out=timed_out,
        )

    async def read_file(self, path: str) -> bytes:
        target = await self._inside(path)
        try:
            return await anyio.Path(target).read_bytes()
        except IsADirectoryError as exc:
            raise ToolError("", f"{path} is a directory") from exc
        except OSError as exc:
            raise ToolError("", f"cannot read {path}: {exc.strerror or exc}") from exc

    async def write_file(self, path: str, data: bytes) -> None:
        target = await self._inside(path)
        try:
            await anyio.Path(target.parent).mkdir(parents=True, exist_ok=True)
            await anyio.Path(target).write_bytes(data)
        except OSError as exc:
            raise ToolError("", f"cannot write {path}: {exc.strerror or exc}") from exc
