"""The `bash` tool: one shell command in the workspace, with a timeout and an output cap."""

from __future__ import annotations

from pydantic import Field

from orchestrator.llm.tools.base import ArgsModel, ToolContext, ToolResult, TypedTool
from orchestrator.llm.tools.sandbox import DEFAULT_OUTPUT_CAP, CommandResult, ToolSandbox

MAX_TIMEOUT = 600.0


class BashArgs(ArgsModel):
    command: str = Field(min_length=1)
    """The shell command (run with `bash -c` in the workspace root)."""
    timeout: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT)
    """Seconds before the command is killed (default 120)."""
    description: str | None = None
    """A few words saying what the command does."""


def render(result: CommandResult, cap: int) -> str:
    """stdout, stderr and the exit status as one text for the model."""
    parts: list[str] = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.truncated:
        parts.append(f"[output truncated: each stream is capped at {cap} bytes]")
    if result.timed_out:
        parts.append("[command timed out and was killed]")
    elif result.exit_code:
        parts.append(f"[exit code {result.exit_code}]")
    return "\n".join(parts) if parts else "(no output)"


class BashTool(TypedTool[BashArgs]):
    name = "bash"
    description = (
        "Run a bash command in the workspace root and return its stdout, stderr and exit code. "
        "Use it to build, test, and inspect the environment."
    )
    read_only = False
    args_model = BashArgs

    def __init__(
        self, sandbox: ToolSandbox, *, default_timeout: float = 120.0, max_output: int = DEFAULT_OUTPUT_CAP
    ) -> None:
        self._sandbox = sandbox
        self._timeout = default_timeout
        self._cap = max_output

    async def call(self, args: BashArgs, ctx: ToolContext) -> ToolResult:
        result = await self._sandbox.exec(
            ["bash", "-c", args.command], timeout=args.timeout or self._timeout, max_output=self._cap
        )
        return ToolResult(
            output=render(result, self._cap),
            is_error=result.timed_out or result.exit_code != 0,
            metadata={
                "exit_code": result.exit_code,
                "truncated": result.truncated,
                "timed_out": result.timed_out,
            },
        )
