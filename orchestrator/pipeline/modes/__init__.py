"""Stage 5, the modes (DESIGN "Modes on top"): what runs between the Create and Next hooks.

Each `Mode` takes the `Call` and returns its `CallResult`; the assistant's `mode` picks one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from orchestrator.dsl import Assistant, AssistantMode
from orchestrator.pipeline.call import Call
from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.modes.hook import HookMode
from orchestrator.pipeline.modes.llm import LlmMode
from orchestrator.pipeline.modes.runner import RunnerMode


class Mode(Protocol):
    """How a call runs once its hooks let it."""

    @property
    def completes(self) -> bool:
        """False when the mode runs nothing (pure hooks): Next gets `completion: null`."""
        ...

    async def run(self, call: Call) -> CallResult:
        """Run the call; its events go out through `call.emit`.

        Raises:
            ConfigError, SandboxError, ModelError: the mode could not run.
        """
        ...


MODES: Mapping[AssistantMode, Mode] = {
    AssistantMode.RUNNER: RunnerMode(),
    AssistantMode.LLM: LlmMode(),
    AssistantMode.HOOK: HookMode(),
}


def mode_for(assistant: Assistant) -> Mode:
    """The mode the assistant's calls run in."""
    return MODES[assistant.mode]


__all__ = ["MODES", "HookMode", "LlmMode", "Mode", "RunnerMode", "mode_for"]
