"""The native agent loop: model connectors, tools, the loop engine, checkpoints and compaction.

Serves the `yaocode` runner (tools exec'd in the assistant's sandbox), the `tai` CLI (tools on
local subprocesses) and LLM mode (MCP tools, no sandbox). Import from `orchestrator.llm`.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING

from orchestrator.llm.assembly import StepAssembler
from orchestrator.llm.checkpoint import Checkpoint, CheckpointSink, JsonFileCheckpoints, MemoryCheckpoints
from orchestrator.llm.client import ClientSettings, ModelClient
from orchestrator.llm.compaction import Compaction, CompactionPolicy, Compactor, estimate_tokens
from orchestrator.llm.connectors import (
    client_for,
    client_settings,
    compaction_policy,
    model_options,
    package_model,
)
from orchestrator.llm.deltas import (
    ModelDelta,
    StopDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    UsageDelta,
)
from orchestrator.llm.engine import AgentLoop
from orchestrator.llm.event_sink import EventSink, collecting
from orchestrator.llm.loop_state import LoopResult, LoopStop, StepTrace, ToolTrace
from orchestrator.llm.messages import (
    Block,
    ChatMessage,
    ModelOptions,
    ModelRequest,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from orchestrator.llm.subagent import AgentTool

if _TYPE_CHECKING:
    from orchestrator.llm.anthropic_client import AnthropicClient
    from orchestrator.llm.openai_client import OpenAIClient

_SDK_CLIENTS = {
    "AnthropicClient": "orchestrator.llm.anthropic_client",
    "OpenAIClient": "orchestrator.llm.openai_client",
}


def __getattr__(name: str) -> object:
    # The SDK clients load on first use: importing `anthropic` alone takes a second (issue 14).
    if name in _SDK_CLIENTS:
        return getattr(_importlib.import_module(_SDK_CLIENTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentLoop",
    "AgentTool",
    "AnthropicClient",
    "Block",
    "ChatMessage",
    "Checkpoint",
    "CheckpointSink",
    "ClientSettings",
    "Compaction",
    "CompactionPolicy",
    "Compactor",
    "EventSink",
    "JsonFileCheckpoints",
    "LoopResult",
    "LoopStop",
    "MemoryCheckpoints",
    "ModelClient",
    "ModelDelta",
    "ModelOptions",
    "ModelRequest",
    "OpenAIClient",
    "StepAssembler",
    "StepTrace",
    "StopDelta",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "ToolCallArgs",
    "ToolCallBlock",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolResultBlock",
    "ToolSpec",
    "ToolTrace",
    "UsageDelta",
    "client_for",
    "client_settings",
    "collecting",
    "compaction_policy",
    "estimate_tokens",
    "model_options",
    "package_model",
]
