"""The native loop's tool calls as `ToolRequest`s: Cage's canonical names and each call's subject.

The loop asks its gate (`orchestrator.permissions.PermissionGate`) before a call runs; a refused
call is not run and the model gets the refusal as the call's result.
"""

from __future__ import annotations

from orchestrator.llm.messages import ToolCallBlock
from orchestrator.permissions import ToolRequest

CANONICAL: dict[str, str] = {"agent": "task"}
"""Native tool names that differ from Cage's canonical ones (`agent` sub-agents are `task`)."""
SUBJECT_KEYS: dict[str, str] = {
    "bash": "command",
    "read": "path",
    "write": "path",
    "edit": "path",
    "ls": "path",
    "glob": "path",
    "grep": "path",
    "fetch": "url",
    "agent": "prompt",
}
"""The argument a tool's rules match (`ToolRequest.subject`)."""
UNGATED = frozenset({"question"})
"""Tools never checked: asking the user is what the gate is for."""
_PATH_DEFAULT = frozenset({"ls", "glob", "grep"})


def native_request(call: ToolCallBlock, runner: str) -> ToolRequest:
    """`call` as the gate sees it (`ls`, `glob` and `grep` without a path search the workspace root)."""
    key = SUBJECT_KEYS.get(call.name)
    value = call.arguments.get(key) if key is not None else None
    subject = value if isinstance(value, str) else ""
    if not subject and call.name in _PATH_DEFAULT:
        subject = "."
    if call.name == "agent" and not subject:
        prompts = call.arguments.get("prompts")
        if isinstance(prompts, list):
            subject = "\n".join(p for p in prompts if isinstance(p, str))
    return ToolRequest(
        tool=CANONICAL.get(call.name, call.name.lower()),
        input=dict(call.arguments),
        subject=subject,
        call_id=call.id,
        runner=runner,
    )
