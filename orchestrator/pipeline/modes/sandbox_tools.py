"""`LeaseToolSandbox`: the native loop's `ToolSandbox` on a leased sandbox (the `yaocode` runner).

Every tool call becomes one exec in the assistant's container, as the lease's user in its work
dir, with the lease's environment. A command that outlives its timeout — or whose tool call is
cancelled — gets SIGKILL on its whole process group through the exec handle, then the handle is
closed. Files are read and written through small shell scripts run the same way, so they go
through the sandbox user's permissions and cannot follow a symlink out of the workspace.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

from orchestrator.errors import SandboxError, ToolError
from orchestrator.llm.tools import CommandResult
from orchestrator.llm.tools.sandbox import DEFAULT_OUTPUT_CAP
from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.completion import run_to_end
from orchestrator.sandbox.manager import SandboxLease, SandboxManager

MAX_FILE_BYTES = 16 * 2**20
"""The largest file `read_file` hands to a tool."""
FILE_TIMEOUT = 60.0

_READ_SCRIPT = f"""\
root=$(realpath -e -- "$1") || exit 3
p=$(realpath -e -- "$root/$2" 2>/dev/null) || {{ echo "no such file" >&2; exit 4; }}
case "$p" in "$root"|"$root"/*) ;; *) echo "the path resolves outside the workspace" >&2; exit 5;; esac
[ -d "$p" ] && {{ echo "is a directory" >&2; exit 6; }}
[ -r "$p" ] || {{ echo "permission denied" >&2; exit 7; }}
[ "$(stat -c %s -- "$p")" -le {MAX_FILE_BYTES} ] || {{ echo "over {MAX_FILE_BYTES} bytes" >&2; exit 8; }}
exec base64 -- "$p"
"""
"""argv tail: root, path. Prints the file as base64 (wrapped lines, so no line cap is hit)."""

_WRITE_SCRIPT = """\
root=$(realpath -e -- "$1") || exit 3
t=$(realpath -m -- "$root/$2")
case "$t" in "$root"/*) ;; *) echo "the path resolves outside the workspace" >&2; exit 5;; esac
[ -d "$t" ] && { echo "is a directory" >&2; exit 6; }
mkdir -p -- "$(dirname -- "$t")" && cat > "$t"
"""
"""argv tail: root, path; the content on stdin. Parent directories are created as needed."""


class LeaseToolSandbox:
    """`ToolSandbox` whose root is the lease's work dir inside the container."""

    def __init__(self, manager: SandboxManager, lease: SandboxLease) -> None:
        self._manager = manager
        self._lease = lease

    @property
    def root(self) -> str:
        return self._lease.work_dir

    async def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout: float,  # noqa: ASYNC109 - the contract: the sandbox kills the command itself
        max_output: int = DEFAULT_OUTPUT_CAP,
    ) -> CommandResult:
        """Run `argv` in the container; on timeout or cancel kill its process group.

        Raises:
            ToolError: the sandbox could not start the command.
        """
        if not argv:
            raise ToolError("", "empty command")
        spec = ExecSpec(argv=tuple(argv), stdin=stdin, grace_seconds=1.0)
        try:
            handle = await self._manager.exec(self._lease, spec)
        except SandboxError as exc:
            raise ToolError("", f"cannot start {argv[0]!r}: {exc}") from exc
        async with handle:
            done = await run_to_end(handle, timeout=timeout, max_output=max_output)
        return CommandResult(
            exit_code=done.exit_code,
            stdout=done.stdout.decode("utf-8", "replace"),
            stderr=done.stderr.decode("utf-8", "replace"),
            truncated=done.truncated,
            timed_out=done.timed_out,
        )

    async def read_file(self, path: str) -> bytes:
        """Raises `ToolError` when the file is missing, unreadable, too large or outside the root."""
        result = await self._script(_READ_SCRIPT, path, None, max_output=MAX_FILE_BYTES * 2)
        if result.exit_code != 0:
            raise ToolError("", f"cannot read {path}: {_reason(result)}")
        try:
            return base64.b64decode("".join(result.stdout.split()), validate=True)
        except binascii.Error as exc:
            raise ToolError("", f"cannot read {path}: garbled transfer") from exc

    async def write_file(self, path: str, data: bytes) -> None:
        """Raises `ToolError` when the file cannot be written or lies outside the root."""
        result = await self._script(_WRITE_SCRIPT, path, data, max_output=DEFAULT_OUTPUT_CAP)
        if result.exit_code != 0:
            raise ToolError("", f"cannot write {path}: {_reason(result)}")

    async def _script(self, script: str, path: str, stdin: bytes | None, *, max_output: int) -> CommandResult:
        argv = ["sh", "-c", script, "cage-file", self.root, path]
        return await self.exec(argv, stdin=stdin, timeout=FILE_TIMEOUT, max_output=max_output)


def _reason(result: CommandResult) -> str:
    if result.timed_out:
        return "timed out"
    lines = result.stderr.strip().splitlines()
    return lines[-1].removeprefix("sh: ") if lines else f"exit code {result.exit_code}"
