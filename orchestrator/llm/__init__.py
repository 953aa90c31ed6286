"""The native agent loop: model connectors, tools, the loop engine, checkpoints and compaction.

Serves the `yaocode` runner (tools exec'd in the assistant's sandbox), the `tai` CLI (tools on
local subprocesses) and LLM mode (MCP tools, no sandbox). Import from `orchestrator.llm`.
"""

from orchestrator.llm.anthropic_client import AnthropicClient
from orchestrator.llm.assembly import StepAssembler
from orchestrator.llm.client import ClientSettings, ModelClient
from orchestrator.llm.connectors import client_for, client_settings, model_options
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
from orchestrator.llm.openai_client import OpenAIClient

__all__ = [
    "AnthropicClient",
    "Block",
    "ChatMessage",
    "ClientSettings",
    "ModelClient",
    "ModelDelta",
    "ModelOptions",
    "ModelRequest",
    "OpenAIClient",
    "StepAssembler",
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
    "UsageDelta",
    "client_for",
    "client_settings",
    "model_options",
]
