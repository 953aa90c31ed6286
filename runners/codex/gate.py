"""codex's held tool calls (the `PreToolUse` hook input the gate driver prints) as Cage requests.

The driver's line `{"type": "cage.gate.request", "id", "payload"}` carries codex's hook input::

    {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "..."},
     "tool_use_id": "call_...", "cwd": "/workspace", ...}

Canonical names (`orchestrator.permissions.ToolRequest`):

* `Bash` (codex's shell and exec tools) -> `bash`, subject the command;
* `apply_patch` -> one request per file of the patch: `write` for an added file or a move's
  target, `edit` for an updated or deleted one, subject the path (absolute, from the hook's cwd);
* `mcp__<server>__<tool>` -> `mcp:<server>/<tool>`;
* `view_image` -> `read` (subject its path); anything else keeps its name, lowercased.

The answer line for the driver is `{"id", "allow", "message"}` (see `gate_driver.py`).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from orchestrator.permissions import Decision, ToolRequest
from runners.ask_parts import split_asks
from runners.base import PermissionAsk

RUNNER = "codex"
REQUEST_TYPE = "cage.gate.request"
_SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "shell_command", "unified_exec"})
_PATCH_LINE = re.compile(r"^\*\*\* (Add File|Update File|Delete File|Move to): (.+?)\s*$", re.MULTILINE)
_PATCH_TOOL = {"Add File": "write", "Move to": "write", "Update File": "edit", "Delete File": "edit"}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _absolute(path: str, cwd: str) -> str:
    return posixpath.normpath(path if path.startswith("/") or not cwd else posixpath.join(cwd, path))


def _command(tool_input: Mapping[str, Any]) -> str:
    for name in ("command", "cmd"):
        value = tool_input.get(name)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return ""


def _patch_requests(tool_input: Mapping[str, Any], cwd: str, call_id: str | None) -> list[ToolRequest]:
    patch = next((v for k in ("command", "input", "patch") if (v := _text(tool_input.get(k)))), "")
    requests = [
        ToolRequest(
            tool=_PATCH_TOOL[action],
            input={"path": _absolute(path, cwd), "patch": patch},
            subject=_absolute(path, cwd),
            call_id=call_id,
            runner=RUNNER,
        )
        for action, path in _PATCH_LINE.findall(patch)
    ]
    return requests or [ToolRequest(tool="edit", input={"patch": patch}, call_id=call_id, runner=RUNNER)]


def tool_requests(payload: Mapping[str, Any]) -> list[ToolRequest]:
    """The Cage requests one held codex tool call stands for (several for a multi-file patch)."""
    name = _text(payload.get("tool_name")) or "unknown"
    raw_input = payload.get("tool_input")
    tool_input: dict[str, Any] = dict(raw_input) if isinstance(raw_input, dict) else {}
    call_id = _text(payload.get("tool_use_id")) or None
    cwd = _text(payload.get("cwd"))
    lowered = name.lower()
    if lowered in _SHELL_TOOLS:
        command = _command(tool_input)
        return [ToolRequest(tool="bash", input=tool_input, subject=command, call_id=call_id, runner=RUNNER)]
    if lowered == "apply_patch":
        return _patch_requests(tool_input, cwd, call_id)
    if name.startswith("mcp__") and name.count("__") >= 2:
        server, _, tool = name.removeprefix("mcp__").partition("__")
        return [ToolRequest(tool=f"mcp:{server}/{tool}", input=tool_input, call_id=call_id, runner=RUNNER)]
    if lowered == "view_image":
        path = _absolute(_text(tool_input.get("path")), cwd)
        return [ToolRequest(tool="read", input=tool_input, subject=path, call_id=call_id, runner=RUNNER)]
    return [ToolRequest(tool=lowered, input=tool_input, call_id=call_id, runner=RUNNER)]


def answer_line(request_id: str, decision: Decision) -> bytes:
    """The driver's answer line for one held call."""
    message = "" if decision.allow else decision.message or "refused by Cage's permission policy"
    return (json.dumps({"id": request_id, "allow": decision.allow, "message": message}) + "\n").encode()


def asks_for(message: Mapping[str, Any]) -> list[PermissionAsk]:
    """The `PermissionAsk`s of one `cage.gate.request` line (none when it is malformed)."""
    request_id, payload = message.get("id"), message.get("payload")
    if not isinstance(request_id, str):
        return []

    def reply(decision: Decision) -> bytes:
        return answer_line(request_id, decision)

    return split_asks(tool_requests(payload if isinstance(payload, dict) else {}), reply)
