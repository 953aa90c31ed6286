"""Claude Code asking Cage: `can_use_tool` lines (recorded from 2.1.197) -> requests -> replies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator.dsl import McpServerSpec
from orchestrator.permissions import Decision
from orchestrator.stream import CountingIds, TurnBuilder
from runners.base import ControlSource, PermissionAsk, QuestionAsk, TurnRequest
from runners.claude import ClaudeAdapter
from runners.claude.adapter import QUESTION_TOOL
from runners.claude.permissions import DENIED, NO_ANSWER, canonical_tool, permission_settings, subject_of
from runners.claude.translator import ClaudeTranslator

BASH_LINE = (
    '{"type":"control_request","request_id":"bd2adb83-11de-4087-9780-c1c57f6b71fc","request":{"subtype":'
    '"can_use_tool","tool_name":"Bash","display_name":"Bash","input":{"command":"echo hi > /tmp/made.txt",'
    '"description":"Run echo hi > /tmp/made.txt"},"description":"Run echo hi > /tmp/made.txt",'
    '"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"echo hi *"}],'
    '"behavior":"allow","destination":"localSettings"}],"blocked_path":"/tmp/made.txt",'
    '"tool_use_id":"toolu_0830e6aa7493b1b1c0f8_0"}}'
)
QUESTION_LINE = (
    '{"type":"control_request","request_id":"cff70afe-a0a6-4d34-aa94-8f36b135db86","request":{"subtype":'
    '"can_use_tool","tool_name":"AskUserQuestion","display_name":"AskUserQuestion","input":{"questions":'
    '[{"question":"Which colour?","header":"Colour","options":[{"label":"red","description":"warm"},'
    '{"label":"blue","description":"cool"}],"multiSelect":false}]},"tool_use_id":"toolu_da2293ed019c10dd499b_0"}}'
)


def _translator() -> ClaudeTranslator:
    return ClaudeTranslator(TurnBuilder(CountingIds(), runner="claude"), session_id="s-1")


def _reply(data: bytes) -> dict[str, Any]:
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    message = json.loads(data)
    assert message["type"] == "control_response" and message["response"]["subtype"] == "success"
    response: dict[str, Any] = message["response"]
    return response


def test_a_bash_request_becomes_a_canonical_tool_request() -> None:
    translator = _translator()
    assert isinstance(translator, ControlSource)
    assert translator.feed(BASH_LINE) == []
    [request] = translator.take_requests()
    assert translator.take_requests() == []
    assert isinstance(request, PermissionAsk)
    assert request.request.tool == "bash" and request.request.subject == "echo hi > /tmp/made.txt"
    assert request.request.call_id == "toolu_0830e6aa7493b1b1c0f8_0" and request.request.runner == "claude"


def test_the_reply_allows_with_the_input_or_denies_with_the_message() -> None:
    translator = _translator()
    translator.feed(BASH_LINE)
    [request] = translator.take_requests()
    assert isinstance(request, PermissionAsk)
    allowed = _reply(request.reply(Decision(allow=True, by="user")))
    assert allowed["request_id"] == "bd2adb83-11de-4087-9780-c1c57f6b71fc"
    assert allowed["response"] == {
        "behavior": "allow",
        "updatedInput": {"command": "echo hi > /tmp/made.txt", "description": "Run echo hi > /tmp/made.txt"},
    }
    denied = _reply(request.reply(Decision(allow=False, by="policy", message="no writes to /tmp")))
    assert denied["response"] == {"behavior": "deny", "message": "no writes to /tmp"}
    assert _reply(request.reply(Decision(allow=False, by="timeout")))["response"]["message"] == DENIED


def test_ask_user_question_is_a_question_answered_through_updated_input() -> None:
    translator = _translator()
    translator.feed(QUESTION_LINE)
    [request] = translator.take_requests()
    assert isinstance(request, QuestionAsk)
    assert request.question.text == "Which colour?" and request.question.options == ("red", "blue")
    answered = _reply(request.reply("blue"))["response"]
    assert answered["behavior"] == "allow"
    assert answered["updatedInput"]["answers"] == {"Which colour?": "blue"}
    assert answered["updatedInput"]["questions"][0]["header"] == "Colour"
    assert _reply(request.reply("  "))["response"] == {"behavior": "deny", "message": NO_ANSWER}


def test_several_questions_take_one_answer_line_each() -> None:
    message = json.loads(QUESTION_LINE)
    message["request"]["input"]["questions"].append({"question": "How big?", "options": []})
    translator = _translator()
    translator.feed(json.dumps(message))
    [request] = translator.take_requests()
    assert isinstance(request, QuestionAsk)
    assert request.question.text == "1. Which colour? (red / blue)\n2. How big?"
    answers = _reply(request.reply("red\nhuge"))["response"]["updatedInput"]["answers"]
    assert answers == {"Which colour?": "red", "How big?": "huge"}
    same = _reply(request.reply("no idea"))["response"]["updatedInput"]["answers"]
    assert same == {"Which colour?": "no idea", "How big?": "no idea"}


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"control_request","request_id":"r1","request":{"subtype":"hook_callback"}}',
        '{"type":"control_request","request":{"subtype":"can_use_tool","tool_name":"Bash"}}',
        '{"type":"control_request","request_id":"r2","request":{"subtype":"can_use_tool"}}',
    ],
)
def test_other_or_malformed_control_requests_are_raw_events(line: str) -> None:
    translator = _translator()
    events = translator.feed(line)
    assert [e.props.event for e in events] == ["runner/raw"]  # type: ignore[union-attr]
    assert translator.take_requests() == []


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("Bash", "bash"),
        ("Read", "read"),
        ("Write", "write"),
        ("Edit", "edit"),
        ("MultiEdit", "edit"),
        ("Glob", "glob"),
        ("Grep", "grep"),
        ("WebFetch", "fetch"),
        ("Task", "task"),
        ("mcp__orch__report", "mcp:orch/report"),
        ("mcp__my_srv__do__it", "mcp:my_srv/do__it"),
        ("WebSearch", "websearch"),
    ],
)
def test_tool_names_map_to_canonical_ones(name: str, canonical: str) -> None:
    assert canonical_tool(name) == canonical


def test_subjects_are_the_command_path_or_url() -> None:
    assert subject_of("read", {"file_path": "/workspace/a.py"}) == "/workspace/a.py"
    assert subject_of("edit", {"notebook_path": "n.ipynb"}) == "n.ipynb"
    assert subject_of("fetch", {"url": "https://example.com"}) == "https://example.com"
    assert subject_of("glob", {"pattern": "*.py"}) == ""
    assert subject_of("mcp:orch/report", {"text": "x"}) == ""


def _turn(**over: Any) -> TurnRequest:
    values: dict[str, Any] = {
        "assistant_id": "demo.claude",
        "owner": "alice",
        "session_id": "chat-1",
        "turn_id": "turn-1",
        "prompt": "hi",
        "options": {"allowed_tools": ["Read"]},
    }
    values.update(over)
    return TurnRequest(**values)


def test_an_asking_turn_uses_the_stdio_prompt_tool_and_ask_rules() -> None:
    adapter = ClaudeAdapter()
    quiet = adapter.build_exec(_turn())
    asking = adapter.build_exec(_turn(ask_permissions=True))
    assert "bypassPermissions" in quiet.argv and "--permission-prompt-tool" not in quiet.argv
    flags = list(asking.argv)
    assert flags[flags.index("--permission-mode") + 1] == "default"
    assert flags[flags.index("--permission-prompt-tool") + 1] == "stdio"
    settings = flags[flags.index("--settings") + 1]
    assert settings == "/workspace/.cage-state/runner/claude/permissions.json"
    [written] = [f for f in asking.files if f.path.endswith("permissions.json")]
    assert "Bash" in json.loads(written.content)["permissions"]["ask"]
    assert asking.keep_stdin_open and asking.stdin == quiet.stdin
    # everything else is the same exec
    rest = [
        a for a in flags if a not in ("default", "--permission-prompt-tool", "stdio", "--settings", settings)
    ]
    assert rest == [
        a for a in quiet.argv if a not in ("bypassPermissions", "--disallowedTools", QUESTION_TOOL)
    ]


def test_the_question_tool_is_offered_only_when_the_turn_asks() -> None:
    """Without the control channel nobody could answer `AskUserQuestion`: it is not offered."""
    quiet = list(ClaudeAdapter().build_exec(_turn()).argv)
    assert quiet[quiet.index("--disallowedTools") + 1] == QUESTION_TOOL
    asking = list(ClaudeAdapter().build_exec(_turn(ask_permissions=True)).argv)
    assert "--disallowedTools" not in asking and QUESTION_TOOL not in asking


def test_plan_mode_stays_plan_when_asking() -> None:
    asking = ClaudeAdapter().build_exec(_turn(ask_permissions=True, options={"permission_mode": "plan"}))
    flags = list(asking.argv)
    assert flags[flags.index("--permission-mode") + 1] == "plan"


def test_ask_rules_cover_every_mcp_server() -> None:
    rules = json.loads(permission_settings(["orch", "db"]))["permissions"]["ask"]
    assert {"Bash", "Write", "Edit", "Read", "WebFetch", "mcp__orch", "mcp__db"} <= set(rules)
    server = McpServerSpec(id="my.srv", transport="stdio", command="x")
    asking = ClaudeAdapter().build_exec(_turn(ask_permissions=True, mcp_servers=(server,)))
    [written] = [f for f in asking.files if f.path.endswith("permissions.json")]
    assert "mcp__my_srv" in json.loads(written.content)["permissions"]["ask"]
