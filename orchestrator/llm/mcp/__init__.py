"""MCP tools for the native loop (LLM mode, yaocode, tai): connect to an assistant's MCP servers
(official `mcp` SDK; stdio, streamable HTTP, SSE), offer their tools to the loop engine, count
failed attempts, and write the digest a fallback assistant gets when the tool loop gives up.

Import from `orchestrator.llm.mcp`.
"""

from orchestrator.llm.mcp.connection import DEFAULT_TIMEOUT, McpConnection, StdioOpener, host_stdio
from orchestrator.llm.mcp.content import result_text
from orchestrator.llm.mcp.handoff import handoff_digest
from orchestrator.llm.mcp.retries import FailureKind, GuardedToolBox, RetryGuard, StopOnTrip, Trip, failure
from orchestrator.llm.mcp.tool import McpTool, tool_name
from orchestrator.llm.mcp.toolset import McpToolset

__all__ = [
    "DEFAULT_TIMEOUT",
    "FailureKind",
    "GuardedToolBox",
    "McpConnection",
    "McpTool",
    "McpToolset",
    "RetryGuard",
    "StdioOpener",
    "StopOnTrip",
    "Trip",
    "failure",
    "handoff_digest",
    "host_stdio",
    "result_text",
    "tool_name",
]
