"""The timeline's bookkeeping in the browser, on scripted events (the page's own module, loaded
from a real server): each seq is applied once, a gap asks for a resume from the last seq applied
and nothing after it is applied until the replay fills it, messages are reassembled by
`delta_action`, a `permission/request` card answers through the page's hook (Allow, Allow always,
Deny) and shows its deadline and then how it was resolved, and a `question` card answers with one
of its options or a free-text answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver

from orchestrator.api import create_app
from tests.unit.api.conftest import make_settings
from tests.unit.api.harness import ServerThread, fake_services

SCRIPT = """
const done = arguments[arguments.length - 1];
const events = arguments[0];
const later = arguments[1];
import("/ui/timeline.js").then(({ Timeline }) => {
  const root = document.createElement("div");
  document.body.append(root);
  const calls = { gaps: [], answers: [], replies: [] };
  const timeline = new Timeline(root, {
    onGap: (seq) => calls.gaps.push(seq),
    onPermission: (id, decision) => calls.answers.push([id, decision]),
    onQuestion: (id, answer) => calls.replies.push([id, answer]),
    userText: () => undefined,
  });
  const applied = events.map((e) => timeline.apply(e));
  timeline.flush();
  const card = root.querySelector(".permission");
  const labels = [...card.querySelectorAll("button")].map((b) => b.textContent);
  const deadline = card.querySelector(".deadline time")?.getAttribute("datetime");
  card.querySelector("button.danger").click();
  card.querySelector("button.allow-always").click();
  const question = root.querySelector(".question-card");
  const options = [...question.querySelectorAll("button.option")].map((b) => b.textContent);
  question.querySelector("button.option").click();
  const field = question.querySelector("input[name=answer]");
  const label = question.querySelector(`label[for="${field.id}"]`).textContent;
  field.value = "  green, please  ";
  question.querySelector("form").requestSubmit();
  later.forEach((e) => timeline.apply(e));
  done({
    labels, deadline, options, label,
    resolved: card.querySelector(".decision").textContent,
    disabled: [...card.querySelectorAll("button")].every((b) => b.disabled),
    answered: question.querySelector(".decision").textContent,
    questionDisabled: field.disabled,
    applied, calls, lastSeq: timeline.lastSeq,
    text: root.querySelector(".text").textContent,
    tool: root.querySelector(".card.tool .command").textContent,
    toolStatus: root.querySelector(".card.tool").dataset.status,
    permission: root.querySelector(".permission").textContent,
    turnStatus: root.querySelector("article.turn").dataset.status,
  });
}).catch((err) => done({ error: String(err) }));
"""


def ev(seq: int, type_: str, props: dict[str, Any], **envelope: Any) -> dict[str, Any]:
    return {
        "v": 1,
        "seq": seq,
        "ts": 1_735_689_600_000 + seq,
        "session_id": "s",
        "turn_id": "t1",
        "type": type_,
        "props": props,
        **envelope,
    }


def lifecycle(seq: int, name: str, **props: Any) -> dict[str, Any]:
    return ev(seq, "event", {"event": name, **props})


EVENTS = [
    lifecycle(1, "stream_start", assistant_id="a", runner="claude"),
    lifecycle(2, "message_start", message_id="m1", type="text"),
    ev(3, "text", {"content": "Hello "}, message_id="m1", delta=True, delta_action="append"),
    ev(3, "text", {"content": "Hello "}, message_id="m1", delta=True, delta_action="append"),  # duplicate
    ev(5, "text", {"content": "LOST"}, message_id="m1", delta=True, delta_action="append"),  # after a gap
    ev(4, "text", {"content": "world"}, message_id="m1", delta=True, delta_action="append"),  # the replay
    ev(5, "text", {"content": "!"}, message_id="m1", delta=True, delta_action="append"),
    lifecycle(6, "message_start", message_id="x1", type="execute"),
    ev(
        7,
        "execute",
        {"tool_id": "u1", "tool": "Bash", "status": "running"},
        message_id="x1",
        delta=True,
        delta_action="merge",
    ),
    ev(
        8,
        "execute",
        {"tool_id": "u1", "input_delta": '{"command": "l'},
        message_id="x1",
        delta=True,
        delta_action="merge",
    ),
    ev(
        9,
        "execute",
        {"tool_id": "u1", "input_delta": 's -l"}'},
        message_id="x1",
        delta=True,
        delta_action="merge",
    ),
    ev(
        10,
        "execute",
        {"tool_id": "u1", "output": "a\\n", "status": "completed"},
        message_id="x1",
        delta=True,
        delta_action="merge",
    ),
    lifecycle(
        11,
        "permission/request",
        request_id="r1",
        tool="Bash",
        input={"command": "rm -rf /"},
        reason="destructive",
        deadline="2026-12-01T23:30:00Z",
    ),
    lifecycle(
        12,
        "question",
        request_id="q1",
        text="Which colour?",
        options=["red", "blue"],
        deadline="2026-12-01T23:30:00Z",
    ),
]
LATER = [
    lifecycle(
        13,
        "permission/resolved",
        request_id="r1",
        decision="allow",
        by="user",
        always=True,
        rule="allow bash rm -rf /",
    ),
    lifecycle(14, "question/answered", request_id="q1", answer="red", by="user"),
    lifecycle(15, "stream_end", status="completed", duration_ms=900),
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerThread]:
    served = ServerThread(create_app(make_settings(tmp_path), services=fake_services())).start()
    try:
        yield served
    finally:
        served.stop()


def test_seq_bookkeeping_reassembly_and_permission_card(
    server: ServerThread, browser: webdriver.Chrome
) -> None:
    browser.get(server.base_url + "/ui/")
    result: dict[str, Any] = browser.execute_async_script(SCRIPT, EVENTS, LATER)
    assert "error" not in result, result
    assert result["applied"] == [
        True,
        True,
        True,
        False,
        False,
        True,
        True,
        True,
        True,
        True,
        True,
        True,
        True,
        True,
    ]
    assert result["calls"]["gaps"] == [3]  # resume from the last seq applied
    assert result["lastSeq"] == 15
    assert result["text"] == "Hello world!"  # no duplicate, nothing from past the gap
    assert result["tool"] == "ls -l" and result["toolStatus"] == "completed"
    assert "destructive" in result["permission"] and "rm -rf /" in result["permission"]
    assert result["labels"] == ["Allow", "Allow always", "Deny"]
    assert result["deadline"] == "2026-12-01T23:30:00Z"
    assert result["calls"]["answers"] == [["r1", "deny"], ["r1", "allow_always"]]
    assert result["resolved"] == "allowed always (by user)" and result["disabled"]
    assert result["options"] == ["red", "blue"] and result["label"] == "Your answer"
    assert result["calls"]["replies"] == [["q1", "red"], ["q1", "green, please"]]
    assert result["answered"] == "answered: red" and result["questionDisabled"]
    assert result["turnStatus"] == "completed"
