"""opencode's `permission.asked` and `question.asked` events as Cage control requests.

`permission.asked` (opencode 1.18.33, serve mode)::

    {"id": "per_...", "sessionID": "ses_...", "permission": "bash",
     "patterns": ["echo hi > ran.txt"], "metadata": {"command": "echo hi > ran.txt"},
     "always": ["echo *"], "tool": {"messageID": "msg_...", "callID": "call_..."}}

Canonical names (`orchestrator.permissions.ToolRequest`): `bash` (subject the command), `edit`
or `write` (by the tool that asked; one request per path, absolute from the working directory),
`read`, `list` -> `ls`, `glob` / `grep` (subject the search root), `webfetch` -> `fetch`
(subject the URL), `task` (subject the prompt), an MCP tool `<key>_<tool>` (the config key
of server `<id>`) -> `mcp:<id>/<tool>`, anything else (`external_directory`, `websearch`,
`doom_loop`, ...) its own name with the patterns as subjects. opencode asks for an MCP tool
before it reports the call's input (`patterns: ["*"]`, empty metadata): such a request has an
empty input and subject (MCP rules match by server and tool); the input shows in the call's
`execute` event right after (same call id). The answer line for the driver is
`{"permission", "reply": "once"|"reject", "message"}` ("allow always" is the broker's: it adds
a rule and answers the next requests itself, so opencode is only ever told `once`).

`question.asked` carries one or more questions (`question`, `header`, `options[{label}]`); each
is its own `QuestionAsk`, and opencode gets all answers at once
(`{"question", "answers": [["text"], ...]}`), or a rejection (`{"question", "reject": true}`)
when one went unanswered, which ends its tool with an error instead of a wait.
"""

from __future__ import annotations

import json
import posixpath
import threading
from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.permissions import Decision, Question, ToolRequest
from runners.ask_parts import split_asks
from runners.base import PermissionAsk, QuestionAsk

RUNNER = "opencode"
_RENAMED = {"list": "ls", "webfetch": "fetch"}
_PATH_TOOLS = frozenset({"read", "edit", "write", "ls", "external_directory"})
_SEARCH_TOOLS = frozenset({"glob", "grep"})


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _absolute(path: str, workdir: str) -> str:
    if not path:
        return path
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(workdir, path))


def _mcp_name(permission: str, servers: Mapping[str, str]) -> str | None:
    for key in sorted(servers, key=len, reverse=True):
        if permission.startswith(key + "_") and len(permission) > len(key) + 1:
            return f"mcp:{servers[key]}/{permission[len(key) + 1 :]}"
    return None


def _subjects(
    tool: str, patterns: list[str], metadata: Mapping[str, Any], given: Mapping[str, Any], workdir: str
) -> list[str]:
    """What the policy's rules match, one subject per request."""
    if tool == "bash":
        return [_text(metadata.get("command")) or _text(given.get("command")) or " && ".join(patterns)]
    if tool == "fetch":
        return [_text(metadata.get("url")) or _text(given.get("url")) or (patterns[0] if patterns else "")]
    if tool == "task":
        return [_text(given.get("prompt")) or _text(metadata.get("description")) or " ".join(patterns)]
    if tool in _SEARCH_TOOLS:
        return [_absolute(_text(metadata.get("path")) or _text(given.get("path")) or workdir, workdir)]
    if tool in _PATH_TOOLS:
        paths = _metadata_paths(metadata) or patterns or [_text(given.get("filePath"))]
        return [_absolute(p, workdir) for p in paths] or [""]
    return patterns or [""]


def _metadata_paths(metadata: Mapping[str, Any]) -> list[str]:
    """The absolute paths a file tool's metadata names (`filepath`, or `files[].filePath`).

    opencode's patterns are relative to the project's worktree (the git root, or `/` outside
    a repository), which the host cannot know; the metadata's paths are absolute."""
    found = [_text(metadata.get(key)) for key in ("filepath", "filePath")]
    files = metadata.get("files")
    for entry in files if isinstance(files, list) else []:
        if isinstance(entry, dict):
            found += [_text(entry.get(key)) for key in ("filePath", "filepath", "movePath")]
    return list(dict.fromkeys(p for p in found if p.startswith("/")))


def permission_line(permission_id: str, decision: Decision) -> bytes:
    """The driver's answer line for one `permission.asked`."""
    answer: dict[str, Any] = {"permission": permission_id, "reply": "once" if decision.allow else "reject"}
    if not decision.allow:
        answer["message"] = decision.message or "refused by Cage's permission policy"
    return (json.dumps(answer) + "\n").encode()


def permission_asks(
    props: Mapping[str, Any],
    *,
    tool_names: Mapping[str, str],
    tool_inputs: Mapping[str, Any],
    mcp_servers: Mapping[str, str],
    workdir: str,
) -> list[PermissionAsk]:
    """The `PermissionAsk`s of one `permission.asked` (none when it has no id to answer)."""
    permission_id = props.get("id")
    if not isinstance(permission_id, str):
        return []
    permission = _text(props.get("permission")) or "unknown"
    raw_tool = props.get("tool")
    call_id = _text(raw_tool.get("callID")) if isinstance(raw_tool, dict) else ""
    raw_metadata = props.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    raw_given = tool_inputs.get(call_id)
    given: dict[str, Any] = raw_given if isinstance(raw_given, dict) else {}
    tool = _mcp_name(permission, mcp_servers) or _RENAMED.get(permission, permission)
    if tool == "edit" and tool_names.get(call_id) == "write":
        tool = "write"
    patterns = [p for p in _strings(props.get("patterns")) if p != "*"]
    subjects = [""] if tool.startswith("mcp:") else _subjects(tool, patterns, metadata, given, workdir)
    shown = given or {k: v for k, v in metadata.items() if isinstance(k, str)}
    requests = [
        ToolRequest(tool=tool, input=shown, subject=subject, call_id=call_id or None, runner=RUNNER)
        for subject in subjects
    ]

    def reply(decision: Decision) -> bytes:
        return permission_line(permission_id, decision)

    return split_asks(requests, reply)


class _Answers:
    """Collects one answer per question; replies once, when all are in (or one is empty)."""

    def __init__(self, question_id: str, count: int) -> None:
        self._id = question_id
        self._answers: list[str | None] = [None] * count
        self._done = False
        self._lock = threading.Lock()

    def reply_for(self, index: int) -> Callable[[str], bytes]:
        def reply(answer: str) -> bytes:
            with self._lock:
                if self._done:
                    return b""
                self._answers[index] = answer
                if answer and any(a is None for a in self._answers):
                    return b""
                self._done = True
                answers = list(self._answers)
            if not all(answers):
                return (json.dumps({"question": self._id, "reject": True}) + "\n").encode()
            return (json.dumps({"question": self._id, "answers": [[a] for a in answers]}) + "\n").encode()

        return reply


def question_asks(props: Mapping[str, Any]) -> list[QuestionAsk]:
    """The `QuestionAsk`s of one `question.asked`, one per question it holds."""
    question_id = props.get("id")
    raw = props.get("questions")
    infos = [q for q in raw if isinstance(q, dict)] if isinstance(raw, list) else []
    if not isinstance(question_id, str) or not infos:
        return []
    raw_tool = props.get("tool")
    call_id = _text(raw_tool.get("callID")) if isinstance(raw_tool, dict) else ""
    answers = _Answers(question_id, len(infos))
    asks = []
    for index, info in enumerate(infos):
        options = info.get("options")
        listed = [o for o in options if isinstance(o, dict)] if isinstance(options, list) else []
        labels = tuple(label for o in listed if (label := _text(o.get("label"))))
        text = _text(info.get("question")) or _text(info.get("header"))
        question = Question(text=text, options=labels, call_id=call_id or None)
        asks.append(QuestionAsk(question=question, reply=answers.reply_for(index)))
    return asks
