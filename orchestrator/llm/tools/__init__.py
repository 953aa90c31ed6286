"""Tools for the native loop: the Protocol, the registry, the sandbox they run in, coding tools."""

from orchestrator.llm.tools.base import ArgsModel, Tool, ToolBox, ToolContext, ToolResult, TypedTool
from orchestrator.llm.tools.files import EditTool, ReadTool, WriteTool
from orchestrator.llm.tools.paths import workspace_path
from orchestrator.llm.tools.sandbox import CommandResult, LocalSandbox, ToolSandbox
from orchestrator.llm.tools.search import GlobTool, GrepTool, LsTool
from orchestrator.llm.tools.shell import BashTool


def coding_tools(sandbox: ToolSandbox, *, bash_timeout: float = 120.0) -> ToolBox:
    """bash, read, write, edit, glob, grep and ls on one sandbox (add the `agent` tool separately)."""
    return ToolBox(
        [
            BashTool(sandbox, default_timeout=bash_timeout),
            ReadTool(sandbox),
            WriteTool(sandbox),
            EditTool(sandbox),
            GlobTool(sandbox),
            GrepTool(sandbox),
            LsTool(sandbox),
        ]
    )


__all__ = [
    "ArgsModel",
    "BashTool",
    "CommandResult",
    "EditTool",
    "GlobTool",
    "GrepTool",
    "LocalSandbox",
    "LsTool",
    "ReadTool",
    "Tool",
    "ToolBox",
    "ToolContext",
    "ToolResult",
    "ToolSandbox",
    "TypedTool",
    "WriteTool",
    "coding_tools",
    "workspace_path",
]
