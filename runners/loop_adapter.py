"""The contract of a runner whose agent loop runs in the orchestrator (`yaocode`).

A CLI runner (`runners.base.RunnerAdapter`) says what to exec in the sandbox and how to read its
output; a loop runner runs Cage's native loop itself and reaches the sandbox only through what
the pipeline prepared for the turn (`LoopTurn`): the box's exec and file operations for the
coding tools, a launcher for stdio MCP servers, the delivered skills. The pipeline owns the
watchdog (`LoopWatch`: cancel, turn timeout, stall) and the resume store; the adapter never
imports the sandbox or the pipeline (import contract).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from runners.base import Supports, TurnOutcome

if TYPE_CHECKING:  # annotations only: the registry imports this module, and must stay light
    import anyio

    from orchestrator.dsl import Assistant, ConnectorSpec
    from orchestrator.llm import ChatMessage
    from orchestrator.llm.mcp import StdioOpener
    from orchestrator.llm.subagent import ChildSessions
    from orchestrator.llm.tools import ToolSandbox
    from orchestrator.permissions import PermissionGate
    from orchestrator.stream import Emit, Event, TurnBuilder


@dataclass(frozen=True)
class LoopTurn:
    """One turn of a loop runner, prepared by the pipeline in the assistant's leased sandbox."""

    assistant: Assistant
    session_id: str
    turn_id: str
    prompt: ChatMessage
    """The user's message (attached images as parts, or described for a model without vision)."""
    system: str
    connector: ConnectorSpec
    """The connector the loop calls (from the orchestrator: its own URL, no container rewrite)."""
    tools: ToolSandbox
    """The leased box's exec and file operations, for the coding tools."""
    stdio: StdioOpener
    """Starts a stdio MCP server inside the box."""
    state_dir: Path
    """Host directory of the runner's checkpoints and traces (`<data_dir>/<runner>`)."""
    light: ConnectorSpec | None = None
    """The `light` role's connector (conversation summaries), if any."""
    skills_root: str | None = None
    """Where the assistant's skills were delivered in the box; None without skills."""
    resume: Mapping[str, str] = field(default_factory=dict)
    """The state the session's last completed turn left (`LoopRun.resume_state`)."""
    gate: PermissionGate | None = None
    child_sessions: ChildSessions | None = None
    """Where sub-agents open their persisted child sessions."""


@dataclass(frozen=True)
class LoopRun:
    """How a loop turn ended, before the watchdog's say (see `LoopWatch.reason` in the pipeline)."""

    outcome: TurnOutcome
    resume_state: Mapping[str, str] = field(default_factory=dict)
    """What the next turn in the session starts from, if this one counts as completed."""


class LoopWatch(Protocol):
    """The pipeline's watchdog over one loop turn: `run` sets `stop` on cancel, on the turn
    timeout, or when no event went through `emit` for the stall timeout."""

    @property
    def stop(self) -> anyio.Event: ...

    async def emit(self, events: Sequence[Event]) -> None: ...

    async def run(self) -> None: ...


@runtime_checkable
class LoopAdapter(Protocol):
    """A runner whose loop runs in the orchestrator; only its tools run in the sandbox."""

    name: str
    image: str
    """The sandbox image its tools run in (`tools`)."""
    supports: Supports

    async def run(self, turn: LoopTurn, builder: TurnBuilder, emit: Emit, watch: LoopWatch) -> LoopRun:
        """Run the turn: the loop runs while `watch.run` does, and ends when `watch.stop` is set.
        Model, tool and MCP failures end the turn in error; they are never raised.

        Raises:
            ConfigError: bad `runner.options`, or package options the runner refuses.
        """
        ...
