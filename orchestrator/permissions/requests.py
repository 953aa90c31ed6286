"""What an agent asks before a tool runs, and what Cage answers.

A runner (or the native loop) turns its CLI's own request into a `ToolRequest` with Cage's
canonical tool name, hands it to the turn's `PermissionGate`, and maps the `Decision` back into
the CLI's answer. Questions an agent asks its user go the same way (`Question` -> answer text).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

DecidedBy = Literal["policy", "user", "timeout"]


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """One tool call an agent is about to make."""

    tool: str
    """Cage's canonical tool name, the same for every runner: `bash`, `read`, `write`, `edit`,
    `glob`, `grep`, `fetch`, `task`, ... and `mcp:<server>/<tool>` for MCP tools. A tool the
    runner cannot map keeps its CLI name, lowercased."""
    input: Mapping[str, Any] = field(default_factory=dict)
    """The tool's arguments as the CLI gave them (rules match against `subject`)."""
    subject: str = ""
    """The argument rules match: the command for `bash`, the path for file tools, the URL for
    `fetch`, empty when the tool has none."""
    call_id: str | None = None
    """The CLI's id of the tool call, when it has one (ties the request to its `tool` events)."""
    runner: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to a `ToolRequest`."""

    allow: bool
    by: DecidedBy
    message: str = ""
    """Why, in words the agent receives when the call is refused."""
    rule: str | None = None
    """The policy rule that decided (or asked), as written in `sandbox.yao`."""


@dataclass(frozen=True, slots=True)
class Question:
    """A question an agent asks its user mid-turn."""

    text: str
    options: tuple[str, ...] = ()
    """Suggested answers, when the agent offers a choice."""
    call_id: str | None = None


class PermissionGate(Protocol):
    """The turn's permission broker, as runners and the native loop see it."""

    @property
    def asks(self) -> bool:
        """False when the policy is `bypass` with no rules: runners keep their CLI's
        permissions off and never call `check` (today's behaviour)."""
        ...

    async def check(self, request: ToolRequest) -> Decision:
        """Decide a tool call: by rule at once, or by asking the client (waits up to the
        policy's deadline, then applies its default)."""
        ...

    async def ask(self, question: Question) -> str:
        """Put a question to the client and wait for the answer text (empty on timeout)."""
        ...
