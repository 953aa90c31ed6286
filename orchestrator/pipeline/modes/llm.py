"""LLM mode: an assistant without a sandbox runs Cage's native loop (prompts, MCP tools) here."""

from __future__ import annotations

from orchestrator.dsl import McpServerRef
from orchestrator.pipeline.call import Call
from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.modes.llm_checkpoints import StoreCheckpoints, crashed_checkpoint


class LlmMode:
    """Runs the call's native loop; a root call resumes the loop a crash cut short."""

    completes = True

    async def run(self, call: Call) -> CallResult:
        """One LLM-mode turn.

        Raises:
            ConfigError, ModelError: the loop could not run.
        """
        # Imported here: a runner turn never loads the model SDKs or MCP (issue 14).
        from orchestrator.pipeline.modes.llm_turn import LlmTurnInput, run_llm_turn

        scope, options = call.scope, call.options
        root = call.stack.kind == "root"
        crashed = (
            await crashed_checkpoint(scope.store, scope.session_id, scope.turn_id, call.assistant.id)
            if root
            else None
        )
        inp = LlmTurnInput(
            assistant=call.assistant,
            messages=call.messages,
            session_id=scope.session_id,
            turn_id=scope.turn_id,
            connector=options.connector,
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            prompt_preset=options.prompt_preset,
            disable_global_prompts=bool(options.disable_global_prompts),
            global_prompts=call.assistant.global_prompts,
            mcp_servers=tuple(McpServerRef.model_validate(s) for s in options.mcp_servers or ()),
            allow_host_mcp=scope.allow_host_mcp,
            next_handles_tools=await scope.hooks.defines(call.assistant, "next"),
            resumed=crashed.messages if crashed is not None else (),
        )
        call.stage = "llm"
        resumed_from = crashed.turn_id if crashed is not None else None
        result = await run_llm_turn(
            inp,
            loader=scope.loader,
            builder=call.builder,
            emit=call.emit,
            cancel=call.signal.requested,
            checkpoints=StoreCheckpoints(scope.store, resumed_from=resumed_from) if root else None,
            connections=scope.connections,
        )
        if result.fallback_used:  # the fallback assistant's answer is the call's
            call.transcript.answer = result.content
        return call.result(
            result.status,
            error=result.error,
            stop_reason=result.stop_reason,
            usage=result.usage,
            tool_results=tuple(
                t.model_dump(mode="json", include={"call_id", "name", "arguments", "output", "is_error"})
                for t in result.tool_results
            ),
        )
