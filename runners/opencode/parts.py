"""Reading opencode's message parts: tool runs, token counts, errors.

`opencode run --format json` and the `opencode serve` event stream carry the same part objects
(`part.type` `text`, `reasoning`, `tool`, `step-start`, `step-finish`...); both translators read
them here. Raw dicts stop at this module and the translators (STYLE R4, anti-pattern 2).
"""

from __future__ import annotations

import json
from typing import Any, cast

from pydantic import JsonValue

from orchestrator.stream import ExecuteType, Usage

RUNNER = "opencode"
OUTPUT_LIMIT = 1_000_000
"""Characters of a tool's output kept in events; a huge result is cut, with a marker saying so."""
SUMMARY_LIMIT = 80
_SEMANTIC: dict[str, ExecuteType] = {
    "task": "agent",
    "todowrite": "todo",
    "todoread": "todo",
    "question": "question",
    "plan_enter": "plan",
    "plan_exit": "plan",
}
_SUMMARY_KEYS = (
    "command",
    "filePath",
    "file_path",
    "path",
    "pattern",
    "url",
    "query",
    "description",
    "prompt",
)
_ERROR_CODES = {
    "APIError": "api_error",
    "ProviderAuthError": "auth_error",
    "MessageOutputLengthError": "output_length",
    "ContextOverflowError": "context_overflow",
    "UnknownError": "opencode_error",
}


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def semantic_type(tool: str) -> ExecuteType:
    """How the protocol shows a tool: sub-agents, todo lists and questions get their own types."""
    return _SEMANTIC.get(tool, "execute")


def summary(tool: str, tool_input: Any, title: Any = None) -> str | None:
    """One line for humans: the command of a bash call, the path of a file tool, ..."""
    data = as_dict(tool_input)
    text: str | None = None
    if tool == "todowrite" and isinstance(data.get("todos"), list):
        text = f"{len(data['todos'])} todos"
    else:
        for key in _SUMMARY_KEYS:
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                text = value
                break
    if text is None and isinstance(title, str) and title.strip():
        text = title
    if text is None:
        return None
    line = " ".join(text.split())
    return line if len(line) <= SUMMARY_LIMIT else line[: SUMMARY_LIMIT - 3] + "..."


def tool_input(state: dict[str, Any]) -> JsonValue:
    """The tool's input; None while opencode has not parsed it yet (a pending call has `{}`)."""
    value = state.get("input")
    if isinstance(value, dict) and value:
        return cast(JsonValue, value)  # parsed from a JSON line: plain JSON already, no copy needed
    if isinstance(value, str) and value:
        return value
    return None


def clip(text: str) -> str:
    if len(text) <= OUTPUT_LIMIT:
        return text
    return text[:OUTPUT_LIMIT] + f"\n... [{len(text) - OUTPUT_LIMIT} more characters cut by Cage]"


def tool_result(state: dict[str, Any]) -> tuple[str, bool, int | None]:
    """(output, is_error, exit code) of a finished tool state (`completed` or `error`)."""
    metadata = as_dict(state.get("metadata"))
    exit_code = metadata.get("exit")
    code = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
    if state.get("status") == "error":
        error = state.get("error")
        return clip(error if isinstance(error, str) else json.dumps(error)), True, code
    output = state.get("output")
    text = output if isinstance(output, str) else ("" if output is None else json.dumps(output))
    return clip(text), False, code


def step_usage(part: dict[str, Any]) -> Usage:
    """A `step-finish` part's tokens in Cage's terms.

    opencode reports `input` without the cache reads/writes and `output` without the reasoning
    tokens (it prices them separately); `Usage` counts both inside the totals.
    """
    tokens = as_dict(part.get("tokens"))
    cache = as_dict(tokens.get("cache"))
    cached = as_int(cache.get("read")) + as_int(cache.get("write"))
    reasoning = as_int(tokens.get("reasoning"))
    cost = part.get("cost")
    known = isinstance(cost, int | float) and not isinstance(cost, bool) and cost > 0
    # opencode prices calls from the model's configured cost; Cage's generated config has none,
    # so a 0 means "unknown" here, not "free".
    return Usage(
        input_tokens=as_int(tokens.get("input")) + cached,
        cached_input_tokens=cached,
        output_tokens=as_int(tokens.get("output")) + reasoning,
        reasoning_tokens=reasoning,
        cost_usd=float(cast(float, cost)) if known else None,
        scope="step",
    )


def error_details(error: Any) -> tuple[str, str, dict[str, JsonValue]]:
    """(message, code, details) of an opencode error object (`{name, data{message, statusCode...}}`)."""
    if isinstance(error, str):
        return error, "opencode_error", {}
    data = as_dict(as_dict(error).get("data"))
    name = as_dict(error).get("name")
    name = name if isinstance(name, str) else "Error"
    message = data.get("message")
    text = message if isinstance(message, str) and message else name
    details: dict[str, JsonValue] = {"name": name}
    status = data.get("statusCode")
    if isinstance(status, int):
        details["status"] = status
        text = f"{text} (HTTP {status})"
    if isinstance(data.get("isRetryable"), bool):
        details["retryable"] = data["isRetryable"]
    code = _ERROR_CODES.get(name, "opencode_error")
    if code == "api_error" and status in (401, 403):
        code = "auth_error"
    return f"{name}: {text}" if name not in text else text, code, details


def is_abort(error: Any) -> bool:
    return as_dict(error).get("name") == "MessageAbortedError"
