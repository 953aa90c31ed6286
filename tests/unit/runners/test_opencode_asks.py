"""opencode asking through Cage: `permission.asked` / `question.asked` (recorded from opencode
1.18.33 serve) -> control requests and the driver's answer lines, the asking exec, and the serve
driver posting answers to a real HTTP server."""

from __future__ import annotations

import http.server
import importlib.util
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest

from orchestrator.dsl import McpServerSpec
from orchestrator.permissions import Decision
from orchestrator.stream import CountingIds, TurnBuilder, dump_event, validate_stream
from runners.base import ControlSource, PermissionAsk, QuestionAsk
from runners.opencode import OpencodeAdapter
from runners.opencode.asks import permission_asks, question_asks
from runners.opencode.serve_translator import ServeTranslator
from tests.unit.runners.test_opencode_exec import _config, _exec, _turn

SESSION = "ses_dcc5aaf67ffelXMNGGcqSiooAC"
CALL = "call_ae019e5a118e7771b701_0"
BASH_ASKED = {
    "id": "evt_233a56ae10029gsrLl7Xs2em6i",
    "type": "permission.asked",
    "properties": {
        "id": "per_233a56ae1001wBW1hsw6bomCh2",
        "sessionID": SESSION,
        "permission": "bash",
        "patterns": ["echo hi > ran.txt"],
        "metadata": {"command": "echo hi > ran.txt"},
        "always": ["echo *"],
        "tool": {"messageID": "msg_233a5529e001sGDt3RDsyOoLd7", "callID": CALL},
    },
}
QUESTION_ASKED = {
    "id": "evt_233a692aa001rX3GGO2skQQtoR",
    "type": "question.asked",
    "properties": {
        "id": "que_233a692a5001dfD9guor0qSqh2",
        "sessionID": SESSION,
        "questions": [
            {
                "question": "Which colour?",
                "header": "Colour",
                "options": [
                    {"label": "blue", "description": "the sky"},
                    {"label": "red", "description": "a rose"},
                ],
            }
        ],
        "tool": {"messageID": "msg_233a67cf1001N20kPVNdBqV6Rw", "callID": CALL},
    },
}
ALLOW = Decision(allow=True, by="user")
DENY = Decision(allow=False, by="user", message="no shell for you")


def asked(permission: str, patterns: list[str], metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    props = dict(BASH_ASKED["properties"])  # type: ignore[call-overload]
    return {**props, "permission": permission, "patterns": patterns, "metadata": metadata or {}}


def asks(
    props: dict[str, Any], *, names: dict[str, str] | None = None, given: Any = None
) -> list[PermissionAsk]:
    return permission_asks(
        props,
        tool_names=names or {},
        tool_inputs={CALL: given} if given is not None else {},
        mcp_servers={"orch": "orch", "orch_extra": "orch.extra"},
        workdir="/workspace/app",
    )


def test_bash_asks_with_the_command_and_answers_once_or_reject() -> None:
    [ask] = asks(BASH_ASKED["properties"])  # type: ignore[arg-type]
    assert (ask.request.tool, ask.request.subject, ask.request.call_id) == ("bash", "echo hi > ran.txt", CALL)
    assert json.loads(ask.reply(ALLOW)) == {"permission": "per_233a56ae1001wBW1hsw6bomCh2", "reply": "once"}
    assert json.loads(ask.reply(DENY)) == {
        "permission": "per_233a56ae1001wBW1hsw6bomCh2",
        "reply": "reject",
        "message": "no shell for you",
    }


def test_file_tools_ask_once_per_absolute_path_and_the_tool_decides_write_or_edit() -> None:
    edits = asks(asked("edit", ["src/a.py", "../b.py"]), names={CALL: "write"})
    assert [(a.request.tool, a.request.subject) for a in edits] == [
        ("write", "/workspace/app/src/a.py"),
        ("write", "/workspace/b.py"),
    ]
    assert edits[0].reply(ALLOW) == b""  # one answer for both, once the last part is decided
    assert json.loads(edits[1].reply(ALLOW))["reply"] == "once"
    [edit] = asks(asked("edit", ["notes.txt"]), names={CALL: "edit"})
    assert (edit.request.tool, edit.request.subject) == ("edit", "/workspace/app/notes.txt")
    # outside a git repository opencode's patterns are relative to `/`: the metadata's path wins
    [write] = asks(
        asked("edit", ["workspace/made.txt"], {"filepath": "/workspace/made.txt"}), names={CALL: "write"}
    )
    assert (write.request.tool, write.request.subject) == ("write", "/workspace/made.txt")
    files = {"files": [{"filePath": "/w/a.py", "movePath": "/w/b.py"}, {"filePath": "/w/c.py"}]}
    assert [a.request.subject for a in asks(asked("edit", ["a.py", "c.py"], files))] == [
        "/w/a.py",
        "/w/b.py",
        "/w/c.py",
    ]


def test_fetch_search_task_mcp_and_unknown_names() -> None:
    [fetch] = asks(asked("webfetch", ["https://example.com"], {"url": "https://example.com/x"}))
    assert (fetch.request.tool, fetch.request.subject) == ("fetch", "https://example.com/x")
    [grep] = asks(asked("grep", ["TODO"], {"path": "src"}))
    assert (grep.request.tool, grep.request.subject) == ("grep", "/workspace/app/src")
    [ls] = asks(asked("list", ["/workspace/app"]))
    assert (ls.request.tool, ls.request.subject) == ("ls", "/workspace/app")
    [task] = asks(asked("task", ["general"]), given={"prompt": "find the bug", "subagent_type": "general"})
    assert (task.request.tool, task.request.subject) == ("task", "find the bug")
    [mcp] = asks(asked("orch_extra_report", ["*"]))
    assert (mcp.request.tool, mcp.request.subject) == ("mcp:orch.extra/report", "")  # the longest key wins
    [other] = asks(asked("external_directory", ["/etc/*"]))
    assert (other.request.tool, other.request.subject) == ("external_directory", "/etc/*")
    assert permission_asks({}, tool_names={}, tool_inputs={}, mcp_servers={}, workdir="/w") == []


def test_a_question_round_trips_as_one_answer_per_question() -> None:
    [ask] = question_asks(QUESTION_ASKED["properties"])  # type: ignore[arg-type]
    assert (ask.question.text, ask.question.options, ask.question.call_id) == (
        "Which colour?",
        ("blue", "red"),
        CALL,
    )
    assert json.loads(ask.reply("blue")) == {
        "question": "que_233a692a5001dfD9guor0qSqh2",
        "answers": [["blue"]],
    }
    [ask] = question_asks(QUESTION_ASKED["properties"])  # type: ignore[arg-type]
    assert json.loads(ask.reply("")) == {"question": "que_233a692a5001dfD9guor0qSqh2", "reject": True}


def test_several_questions_are_answered_together_or_rejected() -> None:
    props = dict(QUESTION_ASKED["properties"])  # type: ignore[call-overload]
    props["questions"] = [
        {"question": "One?", "header": "1", "options": []},
        {"question": "Two?", "header": "2"},
    ]
    first, second = question_asks(props)
    assert first.reply("a") == b""
    assert json.loads(second.reply("b"))["answers"] == [["a"], ["b"]]
    first, second = question_asks(props)
    assert json.loads(first.reply(""))["reject"] is True
    assert second.reply("b") == b""


def translate(lines: list[dict[str, Any]], *, asking: bool) -> tuple[list[dict[str, Any]], list[Any]]:
    builder = TurnBuilder(CountingIds(), runner="opencode", clock=lambda: 0)
    translator = ServeTranslator(builder, {}, asking=asking, workdir="/workspace")
    assert isinstance(translator, ControlSource)
    events = builder.stream_start("a")
    requests: list[Any] = []
    for line in lines:
        events += translator.feed(json.dumps(line))
        requests += translator.take_requests()
    events += translator.close(130, "", cancelled=True)
    events += builder.stream_end(translator.outcome.status)
    dumped = [dump_event(e) for e in events]
    assert validate_stream(dumped, stamped=False) == []
    return dumped, requests


TOOL_PART = {
    "type": "message.part.updated",
    "properties": {
        "sessionID": SESSION,
        "part": {
            "id": "prt_1",
            "messageID": "msg_1",
            "sessionID": SESSION,
            "type": "tool",
            "tool": "bash",
            "callID": CALL,
            "state": {"status": "running", "input": {"command": "echo hi > ran.txt"}},
        },
    },
}
REPLIED = {
    "type": "permission.replied",
    "properties": {"sessionID": SESSION, "requestID": "per_1", "reply": "once"},
}


def test_the_serve_translator_surfaces_asks_only_when_asking() -> None:
    events, requests = translate([TOOL_PART, BASH_ASKED, REPLIED, QUESTION_ASKED], asking=True)
    assert [type(r) for r in requests] == [PermissionAsk, QuestionAsk]
    assert requests[0].request.input == {"command": "echo hi > ran.txt"}
    assert not [e for e in events if e["props"].get("event") == "runner/raw"]
    events, requests = translate([TOOL_PART, BASH_ASKED, REPLIED], asking=False)
    assert requests == []
    raws = [e["props"]["raw_type"] for e in events if e["props"].get("event") == "runner/raw"]
    assert raws == ["permission.asked", "permission.replied"]  # as before: forwarded raw


def test_asking_always_drives_serve_with_control_stdin_and_asking_config() -> None:
    rexec = _exec(ask_permissions=True, lifecycle="oneshot", options={"drive": "run"})
    assert rexec.argv[:2] == ("python3", "/workspace/.cage-state/runner/opencode/serve_driver.py")
    assert rexec.argv[-1] == "--control"
    assert rexec.keep_stdin_open and rexec.stdin == b'"write hello.txt"\n'
    permission = _config(rexec)["permission"]
    assert permission["*"] == "ask" and permission["bash"] == "ask" and permission["edit"] == "ask"
    assert permission["question"] == "allow" and permission["todowrite"] == "allow"
    server = McpServerSpec(id="my.srv", transport="stdio", command="x")
    translator = OpencodeAdapter().translator(
        TurnBuilder(CountingIds()), _turn(ask_permissions=True, mcp_servers=(server,))
    )
    assert isinstance(translator, ServeTranslator)
    event = {**BASH_ASKED, "properties": asked("my_srv_report", [])}
    assert translator.feed(json.dumps(event)) == []
    [ask] = translator.take_requests()
    assert isinstance(ask, PermissionAsk) and ask.request.tool == "mcp:my.srv/report"


def test_without_asking_nothing_changes() -> None:
    rexec = _exec()
    assert rexec.argv[:2] == ("opencode", "run") and not rexec.keep_stdin_open
    assert _config(rexec)["permission"]["bash"] == "allow"
    assert "--control" not in _exec(lifecycle="session").argv


def load_driver() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "runners" / "opencode" / "incontainer" / "serve_driver.py"
    spec = importlib.util.spec_from_file_location("serve_driver_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"] or 0)) or b"{}")
        self.seen.append((self.path.split("?")[0], body))
        status = 404 if "missing" in self.path else 200
        self.send_response(status)
        self.send_header("Content-Length", "4")
        self.end_headers()
        self.wfile.write(b"true")

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[int, list[tuple[str, dict[str, Any]]]]]:
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], _Recorder.seen
    server.shutdown()
    server.server_close()


def test_the_driver_posts_each_answer_line_to_its_route(
    recorder: tuple[int, list[tuple[str, dict[str, Any]]]], capsys: pytest.CaptureFixture[str]
) -> None:
    port, seen = recorder
    driver = load_driver()
    [bash] = asks(BASH_ASKED["properties"])  # type: ignore[arg-type]
    [question] = question_asks(QUESTION_ASKED["properties"])  # type: ignore[arg-type]
    lines = [
        bash.reply(DENY),
        question.reply("blue"),
        b'{"question": "que_2", "reject": true}\n',
        b"not json\n",
        b'{"permission": "per_missing", "reply": "once"}\n',
    ]
    driver.read_answers(driver.Server(port, "/workspace"), io.StringIO(b"".join(lines).decode()))
    assert seen == [
        (
            "/permission/per_233a56ae1001wBW1hsw6bomCh2/reply",
            {"reply": "reject", "message": "no shell for you"},
        ),
        ("/question/que_233a692a5001dfD9guor0qSqh2/reply", {"answers": [["blue"]]}),
        ("/question/que_2/reject", {}),
        ("/permission/per_missing/reply", {"reply": "once"}),
    ]
    [failed] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert failed["type"] == "cage.driver.reply" and failed["properties"]["ok"] is False


def test_the_driver_forwards_the_requests_of_sub_agent_sessions_only() -> None:
    driver = load_driver()
    turn = driver.Turn(driver.Server(1, "/workspace"), SESSION)

    def created(child: str, parent: str) -> dict[str, Any]:
        return {"type": "session.created", "properties": {"info": {"id": child, "parentID": parent}}}

    def asked_in(session: str, kind: str = "permission.asked") -> dict[str, Any]:
        return {"type": kind, "properties": {**BASH_ASKED["properties"], "sessionID": session}}  # type: ignore[dict-item]

    assert turn.wanted(BASH_ASKED) and turn.wanted(TOOL_PART)
    assert not turn.wanted(asked_in("ses_child"))  # not known as ours yet
    turn.wanted(created("ses_child", SESSION))
    turn.wanted(created("ses_grandchild", "ses_child"))
    turn.wanted(created("ses_other", "ses_someone_else"))
    assert turn.wanted(asked_in("ses_child")) and turn.wanted(asked_in("ses_grandchild", "question.asked"))
    assert not turn.wanted(asked_in("ses_other"))
    child_part = {**TOOL_PART, "properties": {"sessionID": "ses_child", "part": {}}}
    assert not turn.wanted(child_part)  # a sub-agent's own output stays filtered
