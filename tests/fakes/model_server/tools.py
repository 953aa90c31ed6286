"""Matching scripted tool calls against the tools a request offers."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tests.fakes.model_server.scenario import CallPart, ShellPart

SHELL_NAMES = ("Bash", "bash", "exec_command", "shell", "shell_command", "run_shell_command", "local_shell")
"""Shell tool names, most specific first (Claude Code, opencode, codex, others)."""


class OfferedTool(BaseModel):
    """A tool from the request's `tools`, flattened across the three APIs."""

    model_config = ConfigDict(frozen=True)
    name: str
    """The name a script uses: the tool's name, or `<namespace>__<name>` inside a Responses namespace."""
    call_name: str
    """The name to put on the call."""
    namespace: str | None = None
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")
    freeform: bool = False
    """A Responses `custom` tool: takes raw text input rather than JSON arguments."""


class ToolCall(BaseModel):
    """A resolved call, ready to render: JSON `arguments` text or freeform `input`."""

    model_config = ConfigDict(frozen=True)
    id: str
    name: str
    namespace: str | None = None
    arguments: str = "{}"
    input: str | None = None

    @property
    def freeform(self) -> bool:
        return self.input is not None


def pick_shell(tools: list[OfferedTool]) -> OfferedTool | None:
    """The offered shell tool: a known name first, else any name mentioning bash/shell."""
    by_name = {t.name: t for t in tools}
    for name in SHELL_NAMES:
        if name in by_name:
            return by_name[name]
    return next((t for t in tools if "bash" in t.name.lower() or "shell" in t.name.lower()), None)


def _filler(name: str, spec: dict[str, Any]) -> Any:
    """A harmless value for a required field the script does not set."""
    if "default" in spec:
        return spec["default"]
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind in ("integer", "number"):
        return 60000 if "timeout" in name.lower() else 0
    return {"boolean": False, "array": [], "object": {}}.get(str(kind), "")


def shell_arguments(tool: OfferedTool, command: str) -> dict[str, Any]:
    """Arguments for `command` shaped by the shell tool's JSON schema."""
    props: dict[str, Any] = tool.schema_.get("properties") or {}
    required: list[str] = tool.schema_.get("required") or []
    args: dict[str, Any] = {}
    if "command" in props or not props:
        kind = props.get("command", {}).get("type", "string")
        args["command"] = ["bash", "-lc", command] if kind == "array" else command
    if "cmd" in props:
        args["cmd"] = command
    if "description" in props:
        args["description"] = f"Run {command}"[:80]
    for name in required:
        if name not in args:
            args[name] = _filler(name, props.get(name, {}))
    return args


def _freeform_arguments(tool: OfferedTool, text: str) -> dict[str, Any]:
    """A freeform input given to a JSON tool: put it in the first string field."""
    props: dict[str, Any] = tool.schema_.get("properties") or {}
    for name in [*(tool.schema_.get("required") or []), *props]:
        if props.get(name, {}).get("type") == "string":
            return {name: text}
    return {"input": text}


def resolve_call(part: CallPart, tools: list[OfferedTool], call_id: str) -> ToolCall | None:
    """Turn a call part into a concrete call, or None when its tool is not offered (and not forced)."""
    if isinstance(part, ShellPart):
        offered = pick_shell(tools)
        if offered is None:
            forced = json.dumps({"command": part.shell})
            return ToolCall(id=call_id, name="bash", arguments=forced) if part.force else None
        arguments = json.dumps(shell_arguments(offered, part.shell))
        return ToolCall(id=call_id, name=offered.call_name, namespace=offered.namespace, arguments=arguments)
    found = next((t for t in tools if t.name == part.tool), None)
    if found is None and not part.force:
        return None
    name = found.call_name if found else part.tool
    namespace = found.namespace if found else None
    if part.input is None:
        return ToolCall(id=call_id, name=name, namespace=namespace, arguments=json.dumps(part.args))
    if found is None or found.freeform:
        return ToolCall(id=call_id, name=name, namespace=namespace, input=part.input)
    arguments = json.dumps(_freeform_arguments(found, part.input))
    return ToolCall(id=call_id, name=name, namespace=namespace, arguments=arguments)
