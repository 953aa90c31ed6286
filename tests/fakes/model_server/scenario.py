"""Scenarios: what the fake model answers, step by step.

A scenario is a list of steps; each step is one model response made of parts. The step to play
is worked out from the request alone (see `Scenario.step_for`): every tool call a step makes must
come back as a tool result before the next step plays, so a step with three parallel calls is
followed by the next step once three results are in the history.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

_STEP_OPTIONS = frozenset(
    {
        "delay",
        "fail_status",
        "fail_times",
        "hang_after",
        "keepalive",
        "cut_after",
        "retry_after_ms",
        "should_retry",
    }
)


class TextPart(BaseModel):
    """Plain assistant text."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str


class ThinkingPart(BaseModel):
    """A thinking / reasoning block (Anthropic `thinking`, Chat `reasoning_content`, Responses reasoning)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    thinking: str


class ShellPart(BaseModel):
    """A call to whichever shell tool the request offers, with arguments built from its schema."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    shell: str
    force: bool = False
    """Call `bash` with `{"command": ...}` even when the request offers no shell tool."""


class ToolPart(BaseModel):
    """A call to a named tool: JSON `args`, or freeform `input` (e.g. codex's `apply_patch`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    input: str | None = None
    force: bool = False
    """Call the tool even when the request does not offer it."""


Part = TextPart | ThinkingPart | ShellPart | ToolPart
CallPart = ShellPart | ToolPart


class Step(BaseModel):
    """One model response plus the ways it may misbehave."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    parts: list[Part]
    delay: float = 0.0
    """Seconds to wait before each SSE event (before the body when not streaming)."""
    fail_status: int | None = None
    """Answer with this HTTP status and an error body in the API's shape instead of the response."""
    fail_times: int | None = None
    """Fail only the first N requests that play this step (counted by the server); None = always."""
    hang_after: int | None = None
    """Send this many SSE events, then keep the connection open with SSE comments only."""
    keepalive: float = 5.0
    """Seconds between the SSE comments of a hanging stream."""
    cut_after: int | None = None
    """Send this many SSE events, then drop the connection without finishing the response."""
    retry_after_ms: int | None = None
    """Sets `retry-after-ms` (and `retry-after` in whole seconds) on failures."""
    should_retry: bool | None = None
    """Sets `x-should-retry` on failures."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        """Accept a bare part (`{"text": "done"}`) or a part with options beside it as a step."""
        if isinstance(data, dict) and "parts" not in data:
            part = {k: v for k, v in data.items() if k not in _STEP_OPTIONS}
            options = {k: v for k, v in data.items() if k in _STEP_OPTIONS}
            return {"parts": [part] if part else [], **options}
        return data

    @property
    def calls(self) -> list[CallPart]:
        """The tool-call parts, in order."""
        return [p for p in self.parts if isinstance(p, ShellPart | ToolPart)]

    def without_calls(self) -> Step:
        """This step with its tool-call parts removed (used for the final text)."""
        return self.model_copy(
            update={"parts": [p for p in self.parts if not isinstance(p, ShellPart | ToolPart)]}
        )


DONE = Step(parts=[TextPart(text="done")])


class Scenario(BaseModel):
    """A named script of steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    steps: list[Step] = Field(min_length=1)

    def step_for(self, tool_results: int) -> int:
        """Index of the step to play after `tool_results` results since the last user prompt.

        Returns `len(steps)` when the script is finished (every call answered).
        """
        index, remaining = 0, tool_results
        while index < len(self.steps):
            wanted = len(self.steps[index].calls)
            if wanted == 0 or remaining < wanted:
                return index
            remaining -= wanted
            index += 1
        return index

    def pick(self, tool_results: int, has_tools: bool) -> tuple[int, Step]:
        """The step to play and its index (-1 for the built-in `done` text).

        A request without tools (a side request such as a title) and a finished script get the
        final text step.
        """
        index = self.step_for(tool_results) if has_tools else len(self.steps)
        if index < len(self.steps):
            return index, self.steps[index]
        final = self.final_step()
        return (self.steps.index(final) if final in self.steps else -1), final.without_calls()

    def final_step(self) -> Step:
        """The last step without tool calls (what a finished script or a side request gets)."""
        for step in reversed(self.steps):
            if not step.calls:
                return step
        return DONE


def text(value: str) -> TextPart:
    """A text part."""
    return TextPart(text=value)


def thinking(value: str) -> ThinkingPart:
    """A thinking part."""
    return ThinkingPart(thinking=value)


def shell(command: str) -> ShellPart:
    """A shell-tool call part."""
    return ShellPart(shell=command)


def tool(name: str, args: dict[str, Any] | None = None, *, input: str | None = None) -> ToolPart:
    """A named tool call part (JSON `args` or freeform `input`)."""
    return ToolPart(tool=name, args=args or {}, input=input)


def scenario(name: str, steps: list[Step | dict[str, Any]]) -> Scenario:
    """Build a scenario from steps given as `Step`s or JSON-shaped dicts."""
    return Scenario.model_validate({"name": name, "steps": steps})


def load_scenario(path: Path, name: str | None = None) -> Scenario:
    """Read a scenario file: a JSON list of steps, or `{"name"?, "steps": [...]}`."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, list):
        data = {"steps": data}
    data.setdefault("name", name or path.stem)
    return Scenario.model_validate(data)


BUILTIN: dict[str, Scenario] = {
    s.name: s
    for s in (
        scenario("hello", [{"shell": "echo hello > hello.txt"}, {"text": "done"}]),
        scenario("text", [{"text": "Hello from the fake model."}]),
        scenario(
            "thinking", [{"parts": [{"thinking": "Let me think about this."}, {"text": "The answer is 42."}]}]
        ),
        scenario("error500", [{"text": "unreachable", "fail_status": 500}]),
        scenario("error401", [{"text": "unreachable", "fail_status": 401, "should_retry": False}]),
        scenario("slow-tool", [{"shell": "sleep 60"}, {"text": "done"}]),
        scenario("hang", [{"text": "this reply never finishes", "hang_after": 2}]),
    )
}
"""Named scenarios every server knows."""
