"""codex thread items that are tool runs, seen as Cage `execute` messages.

`command_execution`, `file_change`, `mcp_tool_call`, `web_search`, `todo_list` (semantic type
`todo`) and `collab_tool_call` (`agent`) each become a `ToolView`: the tool's name, input and
one-line summary while it runs, and its output, error flag and exit code once it ended. Raw item
dicts stop here; everything returned is typed.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast

from pydantic import JsonValue

from orchestrator.stream import ExecuteType

SUMMARY_CHARS = 120
OUTPUT_CHARS = 256 * 1024
"""Tool output kept per event; a longer one keeps its head and tail (a 50 MB `cat` stays usable)."""
_SHELLS = ("bash", "sh", "zsh", "dash")
_FAILED = ("failed", "declined", "errored")


class ToolView(NamedTuple):
    """One tool-like item as the builder wants it (a tuple: two are made per tool run, and a
    frozen dataclass pays an `object.__setattr__` per field)."""

    tool: str
    input: JsonValue
    summary: str
    semantic_type: ExecuteType = "execute"
    output: str = ""
    is_error: bool = False
    exit_code: int | None = None


def one_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first non-empty line of `text`, cut to `limit` characters with an ellipsis."""
    parts = text.splitlines()  # most summaries are one line: no generator to walk then
    line = parts[0].strip() if len(parts) == 1 else next((part.strip() for part in parts if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def clip(text: str, limit: int = OUTPUT_CHARS) -> str:
    """`text` if short enough, else its head and tail around a note of what was left out."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[-(limit // 4) :]
    return f"{head}\n… [{len(text) - len(head) - len(tail)} characters omitted] …\n{tail}"


_SINGLE_QUOTED = re.compile(r"[ \t\r\n]*([^\s'\"\\]+)[ \t\r\n]+(-c|-lc|-cl)[ \t\r\n]+'([^']*)'[ \t\r\n]*")
"""`<shell> -lc '<script>'` with nothing shlex would read differently: codex's usual wrapper."""


def unwrap_shell(command: str) -> str:
    """The script inside codex's `/bin/bash -lc '<script>'` wrapper; other commands unchanged."""
    simple = _SINGLE_QUOTED.fullmatch(command)
    if simple is not None:  # what `shlex.split` gives for this shape, without its per-character loop
        words = list(simple.groups())
    else:
        try:
            words = shlex.split(command)
        except ValueError:
            return command
    if len(words) == 3 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in ("-c", "-lc", "-cl"):
        return words[2]
    return command


def _script_and_summary(command: str) -> tuple[str, str]:
    """The script of a shell command and its summary line."""
    script = unwrap_shell(command)
    return script, one_line(script)


_cached_script_and_summary = functools.lru_cache(maxsize=256)(_script_and_summary)
"""Each command comes twice (`item.started`, `item.completed`): the second one is looked up."""
_CACHED_COMMAND_CHARS = 4096
"""Longer commands (a heredoc writing a file) are not kept in the cache."""


def _text(raw: Any) -> str:
    return raw if isinstance(raw, str) else ""


def _status_failed(item: Mapping[str, Any]) -> bool:
    return item.get("status") in _FAILED


def _json(value: Any) -> JsonValue:
    """`value` as plain JSON (items come from a parsed JSON line, so this only narrows the type)."""
    return cast(JsonValue, value)


def _command(item: Mapping[str, Any]) -> ToolView:
    command = _text(item.get("command"))
    script, summary = (
        _cached_script_and_summary(command)
        if len(command) <= _CACHED_COMMAND_CHARS
        else _script_and_summary(command)
    )
    exit_code = item.get("exit_code")
    code = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
    return ToolView(
        tool="command_execution",
        input={"command": script},
        summary=summary,
        output=clip(_text(item.get("aggregated_output"))),
        is_error=_status_failed(item) or (code is not None and code != 0),
        exit_code=code,
    )


def _file_change(item: Mapping[str, Any]) -> ToolView:
    raw = item.get("changes")
    changes = [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []
    lines = [f"{_text(c.get('kind')) or 'change'} {_text(c.get('path'))}" for c in changes]
    failed = _status_failed(item)
    summary = (
        lines[0]
        if len(lines) == 1
        else f"{len(lines)} files: " + ", ".join(_text(c.get("path")).rsplit("/", 1)[-1] for c in changes)
    )
    return ToolView(
        tool="file_change",
        input={"changes": _json(changes)},
        summary=one_line(summary),
        output="\n".join(lines) + ("\npatch failed" if failed else ""),
        is_error=failed,
    )


def _mcp_output(item: Mapping[str, Any]) -> str:
    error = item.get("error")
    if isinstance(error, dict) and error.get("message"):
        return _text(error.get("message"))
    result = item.get("result")
    if not isinstance(result, dict):
        return ""
    content = result.get("content")
    texts = (
        [_text(c.get("text")) for c in content if isinstance(c, dict) and c.get("type") == "text"]
        if (isinstance(content, list))
        else []
    )
    if texts:
        return "\n".join(texts)
    structured = result.get("structured_content")
    if structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return json.dumps(content, ensure_ascii=False) if content else ""


def _mcp(item: Mapping[str, Any]) -> ToolView:
    server, tool = _text(item.get("server")), _text(item.get("tool"))
    arguments = item.get("arguments")
    error = item.get("error")
    return ToolView(
        tool=f"mcp__{server}__{tool}",
        input=_json(arguments),
        summary=one_line(_argument_summary(arguments) or f"{server}: {tool}"),
        output=clip(_mcp_output(item)),
        is_error=_status_failed(item) or (isinstance(error, dict) and bool(error)),
    )


def _argument_summary(arguments: Any) -> str:
    if not isinstance(arguments, dict):
        return ""
    for name in ("path", "file_path", "command", "url", "query", "description", "prompt", "message", "text"):
        value = arguments.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _web_search(item: Mapping[str, Any]) -> ToolView:
    query = _text(item.get("query"))
    action = item.get("action")
    return ToolView(
        tool="web_search",
        input={"query": query, "action": _json(action)} if action is not None else {"query": query},
        summary=one_line(query) or "web search",
        output=json.dumps(action, ensure_ascii=False) if action is not None else "",
    )


def _todo(item: Mapping[str, Any]) -> ToolView:
    raw = item.get("items")
    todos = [t for t in raw if isinstance(t, dict)] if isinstance(raw, list) else []
    done = sum(1 for t in todos if t.get("completed") is True)
    lines = [f"[{'x' if t.get('completed') is True else ' '}] {_text(t.get('text'))}" for t in todos]
    return ToolView(
        tool="todo_list",
        input={"items": _json(todos)},
        summary=f"{done}/{len(todos)} done",
        semantic_type="todo",
        output="\n".join(lines),
    )


def _collab(item: Mapping[str, Any]) -> ToolView:
    tool = _text(item.get("tool")) or "collab"
    prompt = _text(item.get("prompt"))
    receivers = item.get("receiver_thread_ids")
    states = item.get("agents_states")
    lines = []
    if isinstance(states, dict):
        for thread, state in states.items():
            status = _text(state.get("status")) if isinstance(state, dict) else ""
            message = _text(state.get("message")) if isinstance(state, dict) else ""
            lines.append(f"{thread}: {status}" + (f" - {message}" if message else ""))
    return ToolView(
        tool=tool,
        input={"prompt": prompt, "receiver_thread_ids": _json(receivers or [])},
        summary=one_line(prompt) or tool,
        semantic_type="agent",
        output="\n".join(lines),
        is_error=_status_failed(item),
    )


_VIEWS: dict[str, Callable[[Mapping[str, Any]], ToolView]] = {
    "command_execution": _command,
    "file_change": _file_change,
    "mcp_tool_call": _mcp,
    "web_search": _web_search,
    "todo_list": _todo,
    "collab_tool_call": _collab,
}
TOOL_ITEM_TYPES = frozenset(_VIEWS)


def tool_view(item: Mapping[str, Any]) -> ToolView | None:
    """The `ToolView` of a tool-like item, None for any other item type."""
    view = _VIEWS.get(_text(item.get("type")))
    return view(item) if view is not None else None
