"""yaocode asks the permission broker before each tool call, through the real pipeline.

`cage run --permissions deny` (CI mode, a real process, the real box): an `ask` rule on `write`
is refused, the file is never written, the model gets the refusal, and the decision is in
`events.jsonl` and `summary.json`. Over a real websocket session (real uvicorn, the real
pipeline, the real box, the fake model scripting the calls): a denied bash never runs and the
model gets the refusal; an approved one runs; no answer applies the default; "allow always"
asks once for two calls (and the next turn too); a question round-trips; the HTTP route answers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.api import create_app
from orchestrator.settings import Settings
from orchestrator.stream import validate_stream
from tests.fakes.model_server import FakeModelServer
from tests.integration.conftest import TEST_RUN_ID
from tests.integration.native.conftest import NativeApp
from tests.integration.runners.conftest import HOST_CA, cage_run
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys
from tests.unit.api.wsclient import SessionClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ALWAYS = "echo a >> always.txt"
SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "perm-ci": [
        {"tool": "write", "args": {"path": "blocked.txt", "content": "should never exist"}},
        {"shell": "echo ran > ran.txt"},
        {"text": "done"},
    ],
    # One turn, one step per case; the test answers each request as it comes.
    "perm-session": [
        {"shell": "echo denied > denied.txt"},  # 1. denied by the user
        {"shell": "echo allowed > allowed.txt"},  # 2. allowed
        {"shell": "echo late > late.txt"},  # 3. no answer: the default (deny)
        {"shell": ALWAYS},  # 4. allow always
        {"tool": "question", "args": {"question": "Which colour?", "options": ["red", "blue"]}},  # 5.
        {"shell": ALWAYS},  # 6. the same call: not asked again
        {"shell": "echo via-http > http.txt"},  # 7. answered over HTTP
        {"text": "done"},
    ],
}
TIMEOUT_S = 6


def _with_policy(app: NativeApp, scenario: str, policy: dict[str, Any], **kwargs: Any) -> str:
    app.server.add_scenario(scenario, SCENARIOS[scenario])
    assistant = app.assistant("yaocode", scenario=scenario, **kwargs)
    path = app.root / "assistants" / "native" / "yaocode" / "sandbox.yao"
    spec = json.loads(path.read_text())
    spec["permissions"] = policy
    path.write_text(json.dumps(spec))
    return assistant


def _results(server: FakeModelServer, scenario: str) -> list[str]:
    return server.requests.for_scenario(scenario)[-1].tool_results()


def test_cage_run_deny_blocks_a_write_and_reports_it(app: NativeApp, workspace: Path, tmp_path: Path) -> None:
    assistant = _with_policy(app, "perm-ci", {"rules": [{"ask": "write"}]})
    out = tmp_path / "out"
    result = cage_run(
        app, assistant, workspace, "write it", extra=["--permissions", "deny", "--output-dir", str(out)]
    )
    assert result.code == 0, result.stderr
    assert not (workspace / "blocked.txt").exists()
    assert (workspace / "ran.txt").read_text() == "ran\n"  # bash is not asked about: bypass
    assert any("no one to ask in CI mode" in r for r in _results(app.server, "perm-ci"))
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert validate_stream(events) == []
    requests = [
        e["props"] for e in events if e["type"] == "event" and e["props"]["event"] == "permission/request"
    ]
    assert [(r["tool"], r["rule"]) for r in requests] == [("write", "ask write")]
    summary = json.loads((out / "summary.json").read_text())
    denied, allowed = summary["permissions"]  # CI mode reports every decision, allowed ones too
    assert denied == {
        "request_id": requests[0]["request_id"],
        "tool": "write",
        "decision": "deny",
        "by": "policy",
        "rule": "ask write",
        "message": "refused: no one to ask in CI mode (--permissions deny)",
    }
    assert (allowed["tool"], allowed["decision"], allowed["by"], allowed["rule"]) == (
        "bash",
        "allow",
        "policy",
        None,
    )
    assert "blocked.txt" not in summary["files_changed"]


ASK_SESSION = f"perm-1-{TEST_RUN_ID[:8]}"
"""A session of this session: a fixed one names one workspace volume for every session on the engine,
and the files an earlier session's turn wrote there (always.txt) would still be in it."""


@pytest.fixture
def session_assistant(app: NativeApp) -> str:
    """Written before the server starts (it loads the app dir once)."""
    policy = {"mode": "ask", "timeout": f"{TIMEOUT_S}s"}
    return _with_policy(app, "perm-session", policy, lifecycle="session")


@pytest.fixture
def served(
    app: NativeApp, session_assistant: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ServerThread, dict[str, str]]]:
    monkeypatch.setenv("FAKE_MODEL_KEY", "sk-fake-e2e-key-123456")
    settings = Settings(
        app_dir=app.root,
        data_dir=app.data_dir,
        sandbox_labels=app.labels,
        bootstrap_admin_key=BOOTSTRAP_KEY,
        extra_ca_certs=Path(HOST_CA) if Path(HOST_CA).is_file() else None,
        reaper_interval=3600.0,
    )
    keys = create_keys(settings, {"dev": ("user", "dev"), "ops": ("admin", "ops")})
    server = ServerThread(create_app(settings)).start(timeout=60)
    try:
        yield server, keys
    finally:
        server.stop(timeout=60)


async def _next_ask(ws: SessionClient) -> dict[str, Any]:
    """The next `permission/request` or `question` event on the socket (others are kept)."""
    while True:
        event = await asyncio.wait_for(ws.next(), 180)
        if event.get("type") == "event" and event["props"]["event"] in ("permission/request", "question"):
            return dict(event["props"])
        if event.get("type") in ("error", "session.error") or (
            event.get("type") == "event" and event["props"]["event"] == "stream_end"
        ):
            raise AssertionError(f"no request came: {event}; before it: {[_brief(e) for e in ws.events]}")


def _brief(event: dict[str, Any]) -> str:
    props = event.get("props") or {}
    return f"{event.get('type')}:{props.get('event') or props.get('name') or ''}"


async def _box_has(http: httpx.AsyncClient, admin: dict[str, str], sandbox: str, path: str) -> str | None:
    """The file's content in the sandbox's workspace, or None when it does not exist."""
    reply = await http.post(
        f"/v1/admin/sandboxes/{sandbox}/exec", headers=admin, json={"argv": ["cat", path]}
    )
    reply.raise_for_status()
    body = reply.json()
    return str(body["stdout"]).strip() if body["exit_code"] == 0 else None


async def test_a_session_asks_before_each_tool_call(
    app: NativeApp, session_assistant: str, served: tuple[ServerThread, dict[str, str]]
) -> None:
    server, keys = served
    user = {"Authorization": f"Bearer {keys['dev']}"}
    admin = {"Authorization": f"Bearer {keys['ops']}"}
    assistant = session_assistant
    ws = await SessionClient.open(server.ws_url, ASK_SESSION, keys["dev"], assistant_id=assistant)
    try:
        await ws.control("session.ready")
        await ws.send(type="user_message", text="go")
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            asked = []
            first = await _next_ask(ws)
            asked.append(first)
            assert (first["tool"], first["input"]["command"]) == ("bash", "echo denied > denied.txt")
            assert first["deadline"] and first.get("rule") is None
            await ws.send(
                type="permission_response",
                request_id=first["request_id"],
                decision="deny",
                message="not that file",
            )
            await ws.control("session.ack")
            second = await _next_ask(ws)
            asked.append(second)
            await ws.send(type="permission_response", request_id=second["request_id"], decision="allow")
            asked.append(await _next_ask(ws))  # 3: left unanswered until its deadline
            fourth = await _next_ask(ws)
            asked.append(fourth)
            assert fourth["input"]["command"] == ALWAYS
            await ws.send(
                type="permission_response", request_id=fourth["request_id"], decision="allow_always"
            )
            question = await _next_ask(ws)
            assert (question["text"], tuple(question["options"])) == ("Which colour?", ("red", "blue"))
            await ws.send(type="question_response", request_id=question["request_id"], answer="blue")
            seventh = await _next_ask(ws)  # 6 was not asked: the session rule allowed it
            asked.append(seventh)
            assert seventh["input"]["command"] == "echo via-http > http.txt"
            late = await http.post(
                f"/v1/sessions/{ASK_SESSION}/permissions/{asked[2]['request_id']}",
                headers=user,
                json={"decision": "allow"},
            )
            assert late.status_code == 404  # decided by its deadline already
            reply = await http.post(
                f"/v1/sessions/{ASK_SESSION}/permissions/{seventh['request_id']}",
                headers=user,
                json={"decision": "allow"},
            )
            assert reply.status_code == 200, reply.text
            await asyncio.wait_for(ws.until_stream_end(), 180)
            events = ws.events
            assert validate_stream(events, stamped=True) == []
            resolved = {
                e["props"]["request_id"]: e["props"]
                for e in events
                if e["type"] == "event" and e["props"]["event"] == "permission/resolved"
            }
            decided = [
                (resolved[a["request_id"]]["decision"], resolved[a["request_id"]]["by"]) for a in asked
            ]
            assert decided == [
                ("deny", "user"),
                ("allow", "user"),
                ("deny", "timeout"),
                ("allow", "user"),
                ("allow", "user"),
            ]
            assert resolved[fourth["request_id"]].get("always") is True
            ready = [
                e["props"]
                for e in events
                if e["type"] == "event"
                and e["props"]["event"] == "sandbox/status"
                and e["props"]["phase"] == "ready"
            ]
            sandbox = ready[-1]["sandbox_id"]
            assert await _box_has(http, admin, sandbox, "denied.txt") is None
            assert await _box_has(http, admin, sandbox, "late.txt") is None
            assert await _box_has(http, admin, sandbox, "allowed.txt") == "allowed"
            assert await _box_has(http, admin, sandbox, "always.txt") == "a\na"
            assert await _box_has(http, admin, sandbox, "http.txt") == "via-http"
            audit = (await http.get("/v1/admin/audit", headers=admin, params={"limit": 100})).json()
            assert sum(1 for r in audit if r["action"].startswith("permission.")) >= 6
    finally:
        await ws.close()
    results = _results(app.server, "perm-session")
    assert any("refused by the user: not that file" in r for r in results)
    assert any(f"no answer within {TIMEOUT_S}s" in r for r in results)
    assert any(r.strip() == "blue" for r in results)


async def test_an_interrupt_while_a_request_waits_refuses_it(
    app: NativeApp, session_assistant: str, served: tuple[ServerThread, dict[str, str]]
) -> None:
    server, keys = served
    admin = {"Authorization": f"Bearer {keys['ops']}"}
    # a session of this session: a fixed one names one workspace volume for every session on the engine
    ws = await SessionClient.open(
        server.ws_url, f"perm-2-{TEST_RUN_ID[:8]}", keys["dev"], assistant_id=session_assistant
    )
    try:
        await ws.control("session.ready")
        await ws.send(type="user_message", text="go")
        asked = await _next_ask(ws)
        await ws.send(type="interrupt")
        end = await asyncio.wait_for(ws.until_stream_end(), 180)
        assert end["props"]["status"] == "cancelled"
        assert validate_stream(ws.events) == []
        [resolved] = [
            e["props"]
            for e in ws.events
            if e["type"] == "event" and e["props"]["event"] == "permission/resolved"
        ]
        assert resolved["request_id"] == asked["request_id"]
        assert (resolved["decision"], resolved["by"]) == ("deny", "policy")
        sandbox = next(
            e["props"]["sandbox_id"]
            for e in ws.events
            if e["type"] == "event"
            and e["props"]["event"] == "sandbox/status"
            and e["props"]["phase"] == "ready"
        )
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            assert await _box_has(http, admin, sandbox, "denied.txt") is None
    finally:
        await ws.close()
