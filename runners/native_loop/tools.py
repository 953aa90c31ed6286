"""The native loop's tools for one turn, the same for `yaocode` (its coding tools run in the
sandbox through the pipeline) and `tai` (they run where `cage-tai` runs, inside the box)."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.llm import AgentTool, ModelClient
from orchestrator.llm.subagent import SUBAGENT_SYSTEM, ChildSessions
from orchestrator.llm.tools import Tool, ToolBox, ToolSandbox, coding_tools
from orchestrator.llm.tools.question import QuestionTool
from orchestrator.llm.tools.skills import SkillCard, SkillTool
from runners.native_loop.options import NativeOptions


def native_tools(
    client: ModelClient,
    sandbox: ToolSandbox,
    options: NativeOptions,
    *,
    runner: str,
    skills: Sequence[SkillCard] = (),
    mcp_tools: Sequence[Tool] = (),
    asks: bool = False,
    sessions: ChildSessions | None = None,
) -> ToolBox:
    """The coding tools on `sandbox`; `agent` (read-only sub-agents, in `sessions` when given)
    unless the options turn it off; `skill` when there are skills; the MCP servers' allowed
    tools; and `question` when the turn asks Cage (`asks`)."""
    tools = coding_tools(sandbox, bash_timeout=options.bash_timeout)
    if options.agent:
        agent = AgentTool(
            client,
            tools,
            runner=runner,
            tool_timeout=options.tool_timeout,
            sessions=sessions,
            system=options.agent_system or SUBAGENT_SYSTEM,
        )
        tools.add(agent)
    if skills:
        tools.add(SkillTool(skills))
    for tool in mcp_tools:
        tools.add(tool)
    if asks:
        tools.add(QuestionTool())
    return tools
