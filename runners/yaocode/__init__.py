"""The `yaocode` runner: Cage's native loop in the orchestrator, its tools in the sandbox
(a `runners.loop_adapter.LoopAdapter`; the pipeline prepares its `LoopTurn`)."""

from runners.yaocode.adapter import RESUME_KEY, YaocodeAdapter

__all__ = ["RESUME_KEY", "YaocodeAdapter"]
