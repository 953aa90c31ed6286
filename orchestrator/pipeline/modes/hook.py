"""Pure-hook mode: the assistant's hooks do all the work; the mode itself runs nothing."""

from __future__ import annotations

from orchestrator.pipeline.call import Call
from orchestrator.pipeline.call_result import CallResult


class HookMode:
    """Nothing runs between the Create and Next hooks; Next gets `completion: null`."""

    completes = False

    async def run(self, call: Call) -> CallResult:
        return call.result("completed")
