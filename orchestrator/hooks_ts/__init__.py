"""Yao TypeScript hooks (`src/index.ts` `Create`/`Next`) and scripts (`agents.<id>.<script>.<Fn>`).

`TsHooks` is what the pipeline calls; the code runs in a locked-down node process
(`runtime.TsRuntime`), bridged to the hook's `ctx` over JSON lines (`bridge`, docs/hooks-ts.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.hooks_ts.bridge import HookContext, context_fields, handlers, sandbox_info, script_handler
from orchestrator.hooks_ts.runtime import TsOutcome, TsRuntime, TsRuntimeError, available

if TYPE_CHECKING:
    from orchestrator.dsl import Assistant

HOOK_NAMES = {"create": "Create", "next": "Next"}
"""Cage's hook names -> the function names Yao looks up in `src/index.ts`."""

__all__ = ["HOOK_NAMES", "TsHooks", "TsOutcome", "TsRuntime", "TsRuntimeError", "available"]


class TsHooks:
    """Runs an assistant's TypeScript hooks and scripts; bundles are cached per file version."""

    def __init__(self, runtime: TsRuntime | None = None) -> None:
        self.runtime = runtime or TsRuntime()

    async def invoke(self, assistant: Assistant, hook: str, ctx: HookContext, *args: Any) -> TsOutcome:
        """Call `Create`/`Next` of `src/index.ts` with a bridged `ctx`.

        Raises:
            TsRuntimeError: the file does not compile, or the hook throws.
        """
        assert assistant.hooks_path is not None
        code = self.runtime.bundler.bundle(assistant.hooks_path)
        fields = {"fields": context_fields(ctx), "sandbox": sandbox_info(ctx)}
        return await self.runtime.run(
            code=code,
            filename="index.ts",
            function=HOOK_NAMES.get(hook, hook),
            args=list(args),
            assistant_id=assistant.id,
            ctx=fields,
            handlers=handlers(ctx, assistant, self.runtime.bundler),
        )

    async def call_script(
        self, assistant: Assistant, script_id: str, function: str, args: Sequence[Any]
    ) -> Any:
        """Run `function(*args)` of `src/<script>.ts` (Yao process `agents.<id>.<script>.<function>`).

        Raises:
            TsRuntimeError: no such script or function, or it throws.
        """
        path = assistant.scripts.get(script_id.lower())
        if path is None:
            raise TsRuntimeError(f"assistant {assistant.id} has no script src/{script_id}.ts")
        bundler = self.runtime.bundler
        outcome = await self.runtime.run(
            code=bundler.bundle(path),
            filename=f"{script_id}.ts",
            function=function,
            args=list(args),
            assistant_id=assistant.id,
            ctx=None,
            handlers={"script": script_handler(assistant, bundler)},
        )
        if not outcome.defined:
            raise TsRuntimeError(f"process agents.{assistant.id}.{script_id}.{function}: no such function")
        return outcome.value
