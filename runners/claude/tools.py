"""What Claude Code's tools are, for people: their semantic type and a one-line summary."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from orchestrator.stream import ExecuteType

_SEMANTIC: Mapping[str, ExecuteType] = {
    "Task": "agent",
    "Agent": "agent",
    "TodoWrite": "todo",
    "EnterPlanMode": "plan",
    "ExitPlanMode": "plan",
    "AskUserQuestion": "question",
    "TaskCreate": "job",
    "TaskGet": "job",
    "TaskList": "job",
    "TaskOutput": "job",
    "TaskStop": "job",
    "TaskUpdate": "job",
}

_SUMMARY_KEYS: Mapping[str, tuple[str, ...]] = {
    "Bash": ("command",),
    "BashOutput": ("bash_id", "shell_id"),
    "KillShell": ("shell_id", "bash_id"),
    "Read": ("file_path",),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "Glob": ("pattern",),
    "Grep": ("pattern",),
    "WebFetch": ("url",),
    "WebSearch": ("query",),
    "Task": ("description", "prompt"),
    "Agent": ("description", "prompt"),
    "Skill": ("skill", "command"),
    "ExitPlanMode": ("plan",),
}
_FALLBACK_KEYS = (
    "file_path",
    "path",
    "command",
    "url",
    "query",
    "pattern",
    "description",
    "subject",
    "prompt",
    "task",
    "instructions",
    "message",
)
SUMMARY_MAX = 120
"""A summary is one line of at most this many characters (an ellipsis marks a cut)."""


def semantic_type(tool: str) -> ExecuteType:
    """The protocol type of a tool run: `agent`, `todo`, `plan`, `job`, `question`, else `execute`."""
    return _SEMANTIC.get(tool, "execute")


def summarize(tool: str, input: JsonValue) -> str | None:
    """One line saying what a tool run does (the command, the file, the question...), or None."""
    if not isinstance(input, dict):
        return None
    special = _special_summary(tool, input)
    if special is not None:
        return _one_line(special)
    for key in _SUMMARY_KEYS.get(tool, _FALLBACK_KEYS):
        value = input.get(key)
        if isinstance(value, str) and value.strip():
            if tool == "Grep" and isinstance(input.get("path"), str):
                return _one_line(f"{value} in {input['path']}")
            return _one_line(value)
    return None


def _special_summary(tool: str, input: dict[str, JsonValue]) -> str | None:
    if tool == "TodoWrite":
        todos = input.get("todos")
        if not isinstance(todos, list):
            return None
        active = [
            t.get("activeForm") or t.get("content")
            for t in todos
            if isinstance(t, dict) and t.get("status") == "in_progress"
        ]
        done = sum(1 for t in todos if isinstance(t, dict) and t.get("status") == "completed")
        head = f"{done}/{len(todos)} done"
        return f"{head}: {active[0]}" if active and isinstance(active[0], str) else head
    if tool == "AskUserQuestion":
        questions = input.get("questions")
        if isinstance(questions, list) and questions and isinstance(questions[0], dict):
            question = questions[0].get("question")
            return question if isinstance(question, str) else None
    return None


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SUMMARY_MAX else line[: SUMMARY_MAX - 1] + "…"
