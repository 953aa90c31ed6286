"""Claude Code asking Cage: `can_use_tool` control requests -> `ControlRequest`s, and the replies.

With `--permission-prompt-tool stdio` Claude Code (2.1.197, measured) prints, for every tool call
its permission mode does not settle itself, a stdout line

    {"type":"control_request","request_id":R,"request":{"subtype":"can_use_tool","tool_name":T,
     "input":{...},"tool_use_id":U,"permission_suggestions":[...],"blocked_path":...}}

and holds the call until a stdin line answers it:

    {"type":"control_response","response":{"subtype":"success","request_id":R,
     "response":{"behavior":"allow","updatedInput":{...}} | {"behavior":"deny","message":M}}}

A denied call does not run; its `tool_result` is `M` with `is_error` (the model sees it). The
`AskUserQuestion` tool comes the same way: allowing it with `updatedInput` = its input plus
`answers` ({question text: answer}) makes the answers its tool result.

Which calls ask: `--permission-mode default` asks for writes, commands and reads outside the
work dir; the `ask` rules of `permission_settings` make every built-in tool with an effect (and
every MCP server's tools) ask as well, so Cage's policy decides them all. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.permissions import Decision, Question, ToolRequest
from runners.base import ControlRequest, PermissionAsk, QuestionAsk

RUNNER = "claude"
PROMPT_TOOL_FLAGS: tuple[str, ...] = ("--permission-prompt-tool", "stdio")
ASKING_MODE = "default"
"""The permission mode of an asking turn (`plan` is kept when the options ask for it)."""
QUESTION_TOOL = "AskUserQuestion"
"""Claude Code's question tool; it reaches Cage only through the asking mode's control channel."""

CANONICAL: Mapping[str, str] = {
    "Bash": "bash",
    "Read": "read",
    "Write": "write",
    "Edit": "edit",
    "MultiEdit": "edit",
    "NotebookEdit": "edit",
    "Glob": "glob",
    "Grep": "grep",
    "LS": "ls",
    "WebFetch": "fetch",
    "Task": "task",
    "Agent": "task",
}
"""Claude Code's tool names -> Cage's canonical ones (others: lowercased; MCP: `mcp:srv/tool`)."""

_SUBJECT_KEYS: Mapping[str, tuple[str, ...]] = {
    "bash": ("command",),
    "read": ("file_path",),
    "write": ("file_path",),
    "edit": ("file_path", "notebook_path"),
    "glob": ("path",),
    "grep": ("path",),
    "ls": ("path",),
    "fetch": ("url",),
    "task": ("prompt", "description"),
}

ASK_RULES: tuple[str, ...] = (
    "Bash",
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "Glob",
    "Grep",
    "LS",
    "WebFetch",
    "WebSearch",
    "Task",
    "Agent",
)
"""Built-in tools that always ask (an `ask` rule beats an allow rule and the mode's own allows)."""

NO_ANSWER = "The user did not answer the question."
DENIED = "Cage's permission policy refused this tool call."


def permission_settings(mcp_servers: Sequence[str]) -> str:
    """The `--settings` document of an asking turn: `ask` rules for every tool with an effect."""
    rules = [*ASK_RULES, *(f"mcp__{name}" for name in mcp_servers)]
    return json.dumps({"permissions": {"ask": rules}}, indent=2) + "\n"


def canonical_tool(name: str) -> str:
    """Cage's name of a Claude Code tool: `Bash` -> `bash`, `mcp__srv__tool` -> `mcp:srv/tool`."""
    if name.startswith("mcp__"):
        server, _, tool = name[len("mcp__") :].partition("__")
        if server and tool:
            return f"mcp:{server}/{tool}"
    return CANONICAL.get(name, name.lower())


def subject_of(tool: str, input: Mapping[str, Any]) -> str:
    """The argument policy rules match for a canonical `tool` (empty when it has none)."""
    for key in _SUBJECT_KEYS.get(tool, ()):
        value = input.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def control_request(message: Mapping[str, Any]) -> ControlRequest | None:
    """The `ControlRequest` of a `control_request` line, or None when it is not `can_use_tool`."""
    request = message.get("request")
    request_id = message.get("request_id")
    if not isinstance(request, dict) or not isinstance(request_id, str) or not request_id:
        return None
    if request.get("subtype") != "can_use_tool":
        return None
    name = request.get("tool_name")
    raw_input = request.get("input")
    if not isinstance(name, str) or not name:
        return None
    input: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
    call_id = request.get("tool_use_id") if isinstance(request.get("tool_use_id"), str) else None
    if name == QUESTION_TOOL:
        return QuestionAsk(_question(input, call_id), _AnswerReply(request_id, input))
    tool = canonical_tool(name)
    tool_request = ToolRequest(
        tool=tool, input=input, subject=subject_of(tool, input), call_id=call_id, runner=RUNNER
    )
    return PermissionAsk(tool_request, _DecisionReply(request_id, input))


def _question(input: Mapping[str, Any], call_id: str | None) -> Question:
    """One `Question` for the tool's 1-4 questions (several: numbered, one answer line each)."""
    questions = _questions(input)
    if len(questions) == 1:
        text, options = questions[0]
        return Question(text=text, options=options, call_id=call_id)
    lines = [
        f"{n}. {text}" + (f" ({' / '.join(opts)})" if opts else "")
        for n, (text, opts) in enumerate(questions, 1)
    ]
    return Question(text="\n".join(lines) or "(no question)", call_id=call_id)


def _questions(input: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    out: list[tuple[str, tuple[str, ...]]] = []
    for item in input.get("questions") or []:
        if not isinstance(item, dict) or not isinstance(item.get("question"), str):
            continue
        labels = tuple(
            o["label"]
            for o in item.get("options") or []
            if isinstance(o, dict) and isinstance(o.get("label"), str)
        )
        out.append((item["question"], labels))
    return out


def response_line(request_id: str, response: Mapping[str, Any]) -> bytes:
    """The stdin line answering control request `request_id`."""
    body = {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class _DecisionReply:
    """`Decision` -> the `can_use_tool` answer: allow with the input unchanged, or deny with why."""

    def __init__(self, request_id: str, input: Mapping[str, Any]) -> None:
        self.request_id, self.input = request_id, dict(input)

    def __call__(self, decision: Decision) -> bytes:
        if decision.allow:
            return response_line(self.request_id, {"behavior": "allow", "updatedInput": self.input})
        return response_line(self.request_id, {"behavior": "deny", "message": decision.message or DENIED})


class _AnswerReply:
    """Answer text -> `AskUserQuestion` allowed with `answers` (empty: denied as unanswered)."""

    def __init__(self, request_id: str, input: Mapping[str, Any]) -> None:
        self.request_id, self.input = request_id, dict(input)

    def __call__(self, answer: str) -> bytes:
        if not answer.strip():
            return response_line(self.request_id, {"behavior": "deny", "message": NO_ANSWER})
        texts = [text for text, _ in _questions(self.input)]
        lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
        if len(texts) > 1 and len(lines) == len(texts):
            answers = dict(zip(texts, lines, strict=True))
        else:
            answers = {text: answer.strip() for text in texts}
        return response_line(
            self.request_id, {"behavior": "allow", "updatedInput": {**self.input, "answers": answers}}
        )
