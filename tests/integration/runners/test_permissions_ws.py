"""Claude Code, codex, opencode and tai ask through a real websocket session.

One real server (uvicorn around `create_app`, the real pipeline, the real runner image on the
engine) for the module; per runner one session whose one turn plays a fake-model script of one
tool call per case, each answered as its request streams in. Per runner, over the websocket: a
denied `bash` call never runs (checked in the container) and the model gets the refusal; an
approved one runs; a question round-trips into the tool's result (codex has no question tool).
Claude also: no answer applies the default; "allow always" stops asking. The HTTP answer routes:
`POST /v1/admin/sessions/{id}/permissions/{request_id}?owner=` (opencode, codex),
`POST /v1/sessions/{id}/questions/{request_id}` (opencode) and the admin question route (tai),
with their refusals (another owner's key, the wrong `owner`, a user's key on the admin route).

`cage run --permissions deny` with claude (a real process, the real box): an `ask` rule on
`write` is refused, the file is never written, the model gets the refusal, and the decision is in
`events.jsonl` and `summary.json`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from orchestrator.api import create_app
from orchestrator.settings import Settings
from orchestrator.store import KeyRole, Store
from orchestrator.stream import validate_stream
from tests.fakes.model_server import FakeModelServer
from tests.integration.conftest import TEST_RUN_ID
from tests.integration.runners.conftest import HOST_CA, RUNNER_MODEL, App, cage_run
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread
from tests.unit.api.wsclient import Frame, SessionClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TIMEOUT_S = 8
"""The claude policy's `timeout`: the unanswered case waits this long (the others answer at once)."""
REFUSAL = "not that file"
ANSWER = "blue, definitely"
SHAPE = "round, please"
DENIED = "echo denied > denied.txt"
ALLOWED = "echo allowed > allowed.txt"
LATE = "echo late > late.txt"
ALWAYS = "echo a >> always.txt"
BY_ADMIN = "echo admin > admin.txt"
MODEL_KEY = "sk-fake-ws-perm-key-123456"

_COLOUR = ("Which colour?", ("red", "blue"))
_SHAPE = ("Which shape?", ("round", "square"))


def _claude_question(text: str, options: tuple[str, ...]) -> dict[str, Any]:
    choices = [{"label": o, "description": o} for o in options]
    question = {"question": text, "header": "Pick", "options": choices, "multiSelect": False}
    return {"tool": "AskUserQuestion", "args": {"questions": [question]}}


def _opencode_question(text: str, options: tuple[str, ...]) -> dict[str, Any]:
    choices = [{"label": o, "description": o} for o in options]
    return {
        "tool": "question",
        "args": {"questions": [{"question": text, "header": "Pick", "options": choices}]},
    }


def _tai_question(text: str, options: tuple[str, ...]) -> dict[str, Any]:
    return {"tool": "question", "args": {"question": text, "options": list(options)}}


SCENARIOS: dict[str, list[dict[str, Any]]] = {
    # One turn, one step per case; the test answers each request as it comes.
    "claude": [
        {"shell": DENIED},  # denied over the websocket
        {"shell": ALLOWED},  # allowed over the websocket
        {"shell": LATE},  # no answer: the default (deny) at the deadline
        {"shell": ALWAYS},  # allow always
        _claude_question(*_COLOUR),  # answered over the websocket
        {"shell": ALWAYS},  # the same call: not asked again
        {"text": "done"},
    ],
    "codex": [
        {"shell": DENIED},
        {"shell": ALLOWED},
        {"shell": BY_ADMIN},  # denied through the admin route
        {"text": "done"},
    ],
    "opencode": [
        {"shell": DENIED},
        {"shell": ALLOWED},
        _opencode_question(*_COLOUR),  # over the websocket
        {"shell": BY_ADMIN},  # allowed through the admin route
        _opencode_question(*_SHAPE),  # through POST /v1/sessions/{id}/questions/{request_id}
        {"text": "done"},
    ],
    "tai": [
        {"shell": DENIED},
        {"shell": ALLOWED},
        _tai_question(*_COLOUR),  # over the websocket
        _tai_question(*_SHAPE),  # through the admin question route
        {"text": "done"},
    ],
}
CONNECTOR = {"claude": "anthropic", "codex": "openai", "opencode": "openai", "tai": "anthropic"}
MODEL = {**RUNNER_MODEL, "tai": "claude-sonnet-4-5"}


def _scenario(runner: str) -> str:
    return f"ws-perm-{runner}"


def _write_assistant(root: Path, server: FakeModelServer, runner: str, policy: dict[str, Any]) -> str:
    """A session assistant of `runner` playing its scenario under `policy`; returns its id."""
    kind = CONNECTOR[runner]
    conn_id = f"fake-ws-{runner}"
    (root / "connectors").mkdir(parents=True, exist_ok=True)
    (root / "connectors" / f"{conn_id}.conn.yao").write_text(
        json.dumps(
            {
                "label": conn_id,
                "type": kind,
                "options": {
                    "model": f"{MODEL[runner]}@{_scenario(runner)}",
                    "key": "$ENV.FAKE_MODEL_KEY",
                    "host": server.url if kind == "anthropic" else server.url + "/v1",
                    "max_retries": 1,
                },
            }
        )
    )
    adir = root / "assistants" / "wsperm" / runner
    adir.mkdir(parents=True, exist_ok=True)
    (adir / "package.yao").write_text(json.dumps({"name": f"ws {runner}", "connector": conn_id}))
    (adir / "prompts.yml").write_text("- role: system\n  content: You are a careful coding agent.\n")
    sandbox = {
        "version": "2.0",
        "runner": {"name": runner},
        "lifecycle": "session",
        "computer": {"memory": "1GB"},
        "permissions": policy,
    }
    (adir / "sandbox.yao").write_text(json.dumps(sandbox))
    return f"wsperm.{runner}"


@dataclass(frozen=True)
class Key:
    id: str
    token: str

    @property
    def header(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


KEYS: tuple[tuple[str, KeyRole], ...] = (("dev", "user"), ("eve", "user"), ("ops", "admin"))


def _create_keys(settings: Settings) -> dict[str, Key]:
    """`dev` and `eve` (users, owners of themselves) and `ops` (an admin), with their key ids."""

    async def make() -> dict[str, Key]:
        async with Store.from_settings(settings) as store:
            await store.migrate()
            keys = {}
            for name, role in KEYS:
                key_id, token = await store.keys.create_key(name, role, name)
                keys[name] = Key(key_id, token)
            return keys

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, make).result()


@dataclass(frozen=True)
class Served:
    server: ServerThread
    keys: dict[str, Key]
    model: FakeModelServer


@pytest.fixture(scope="module")
def served(
    model_server: FakeModelServer, test_run_labels: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One server for the module; every runner's assistant is written before it starts (it loads
    the app dir once)."""
    root = tmp_path_factory.mktemp("ws-perm")
    app_dir = root / "app"
    for runner, steps in SCENARIOS.items():
        model_server.add_scenario(_scenario(runner), steps)
        timeout = f"{TIMEOUT_S}s" if runner == "claude" else "5m"
        _write_assistant(app_dir, model_server, runner, {"mode": "ask", "timeout": timeout})
    settings = Settings(
        app_dir=app_dir,
        data_dir=root / "data",
        sandbox_labels={**test_run_labels, "cage.test-case": uuid.uuid4().hex[:12]},
        bootstrap_admin_key=BOOTSTRAP_KEY,
        extra_ca_certs=Path(HOST_CA) if Path(HOST_CA).is_file() else None,
        reaper_interval=3600.0,
    )
    keys = _create_keys(settings)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FAKE_MODEL_KEY", MODEL_KEY)
        server = ServerThread(create_app(settings)).start(timeout=60)
        try:
            yield Served(server, keys, model_server)
        finally:
            server.stop(timeout=60)


class Session:
    """One websocket session of `dev` and the HTTP client beside it."""

    def __init__(self, served: Served, ws: SessionClient, http: httpx.AsyncClient, session: str) -> None:
        self.served, self.ws, self.http, self.session = served, ws, http, session
        self._read = 0

    async def next_ask(self) -> dict[str, Any]:
        """The next `permission/request` or `question` not returned yet (read already or still to come)."""
        while True:
            while self._read < len(self.ws.events):
                event = self.ws.events[self._read]
                self._read += 1
                props = event.get("props") or {}
                if event.get("type") == "event" and props.get("event") in ("permission/request", "question"):
                    return dict(props)
                if event.get("type") == "error" or props.get("event") == "stream_end":
                    briefs = [_brief(e) for e in self.ws.events]
                    raise AssertionError(f"no request came: {event}; the stream: {briefs}")
            await asyncio.wait_for(self.ws.next(), 180)

    async def answer(self, request: dict[str, Any], decision: str, message: str | None = None) -> None:
        """Answer a permission request with a websocket frame and wait for its `session.ack`."""
        frame: dict[str, Any] = {"request_id": request["request_id"], "decision": decision}
        if message is not None:
            frame["message"] = message
        await self.ws.send(type="permission_response", **frame)
        await self._ack()

    async def reply(self, question: dict[str, Any], text: str) -> None:
        await self.ws.send(type="question_response", request_id=question["request_id"], answer=text)
        await self._ack()

    async def _ack(self) -> None:
        ack = await asyncio.wait_for(self.ws.control("session.ack"), 60)
        assert ack["type"] == "session.ack", ack

    async def end(self) -> list[Frame]:
        end = await asyncio.wait_for(self.ws.until_stream_end(), 180)
        assert end["props"]["status"] == "completed", end
        assert validate_stream(self.ws.events, stamped=True) == []
        return self.ws.events

    async def in_box(self, path: str) -> str | None:
        """The file's content in the session box's workspace, or None when it does not exist."""
        ready = [
            e["props"]["sandbox_id"]
            for e in self.ws.events
            if e["type"] == "event"
            and e["props"]["event"] == "sandbox/status"
            and e["props"]["phase"] == "ready"
        ]
        reply = await self.http.post(
            f"/v1/admin/sandboxes/{ready[-1]}/exec",
            headers=self.served.keys["ops"].header,
            json={"argv": ["cat", path]},
        )
        reply.raise_for_status()
        body = reply.json()
        return str(body["stdout"]).strip() if body["exit_code"] == 0 else None

    async def audit(self, action: str) -> list[dict[str, Any]]:
        """This turn's audit records whose action starts with `action` (permission records name the
        turn, question records their request)."""
        turn_id = self.ws.events[-1]["turn_id"]
        asked = {
            e["props"]["request_id"]
            for e in self.ws.events
            if e["type"] == "event" and "request_id" in e["props"]
        }
        reply = await self.http.get(
            "/v1/admin/audit", headers=self.served.keys["ops"].header, params={"limit": 1000}
        )
        reply.raise_for_status()
        return [
            r
            for r in reply.json()
            if r["action"].startswith(action)
            and (r["detail"].get("turn_id") == turn_id or r["detail"].get("request_id") in asked)
        ]

    def resolved(self) -> dict[str, dict[str, Any]]:
        return {
            e["props"]["request_id"]: e["props"]
            for e in self.ws.events
            if e["type"] == "event" and e["props"]["event"] == "permission/resolved"
        }

    def tool_results(self, runner: str) -> list[str]:
        """Every tool result the model was sent in this runner's scenario."""
        records = self.served.model.requests.for_scenario(_scenario(runner))
        return [text for record in records for text in record.tool_results()]


def _brief(event: Frame) -> str:
    props = event.get("props") or {}
    return f"{event.get('type')}:{props.get('event') or props.get('name') or ''}"


class _Open:
    def __init__(self, served: Served, runner: str) -> None:
        self.served, self.runner = served, runner
        self.session = f"wsperm-{runner}-{TEST_RUN_ID[:6]}-{uuid.uuid4().hex[:6]}"

    async def __aenter__(self) -> Session:
        server = self.served.server
        self.ws = await SessionClient.open(
            server.ws_url, self.session, self.served.keys["dev"].token, assistant_id=f"wsperm.{self.runner}"
        )
        self.http = httpx.AsyncClient(base_url=server.base_url, timeout=60)
        await self.ws.control("session.ready")
        await self.ws.send(type="user_message", text="go")
        return Session(self.served, self.ws, self.http, self.session)

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()
        await self.http.aclose()


def _is_bash(request: dict[str, Any], command: str) -> bool:
    """A `permission/request` for `bash` running `command` (each CLI shapes its input its own way)."""
    return request.get("tool") == "bash" and command in str(request.get("input"))


async def _deny_then_allow(session: Session, runner: str) -> list[dict[str, Any]]:
    """The first two cases of every runner: a bash call denied, then one allowed, over the socket."""
    denied = await session.next_ask()
    assert _is_bash(denied, DENIED), denied
    assert denied["deadline"]
    await session.answer(denied, "deny", REFUSAL)
    allowed = await session.next_ask()
    assert _is_bash(allowed, ALLOWED), allowed
    await session.answer(allowed, "allow")
    return [denied, allowed]


async def _check_deny_then_allow(session: Session, runner: str, asked: list[dict[str, Any]]) -> None:
    resolved = session.resolved()
    decided = [(resolved[a["request_id"]]["decision"], resolved[a["request_id"]]["by"]) for a in asked[:2]]
    assert decided == [("deny", "user"), ("allow", "user")]
    assert await session.in_box("denied.txt") is None
    assert await session.in_box("allowed.txt") == "allowed"
    results = session.tool_results(runner)
    assert any(REFUSAL in r for r in results), results


async def test_claude_asks_over_the_websocket(served: Served) -> None:
    async with _Open(served, "claude") as session:
        asked = await _deny_then_allow(session, "claude")
        late = await session.next_ask()  # left unanswered until its deadline
        assert _is_bash(late, LATE), late
        always = await session.next_ask()  # asked once the late one was decided
        assert _is_bash(always, ALWAYS), always
        late_answer = await session.http.post(
            f"/v1/sessions/{session.session}/permissions/{late['request_id']}",
            headers=served.keys["dev"].header,
            json={"decision": "allow"},
        )
        assert late_answer.status_code == 404, late_answer.text  # decided by its deadline already
        await session.answer(always, "allow_always")
        question = await session.next_ask()
        assert (question["text"], tuple(question["options"])) == _COLOUR, question
        await session.reply(question, ANSWER)
        await session.end()
        await _check_deny_then_allow(session, "claude", asked)
        requests = [
            e
            for e in session.ws.events
            if e["type"] == "event" and e["props"]["event"] == "permission/request"
        ]
        assert len(requests) == 4  # the second ALWAYS call was not asked about
        resolved = session.resolved()
        assert (resolved[late["request_id"]]["decision"], resolved[late["request_id"]]["by"]) == (
            "deny",
            "timeout",
        )
        assert resolved[always["request_id"]].get("always") is True
        assert await session.in_box("late.txt") is None
        assert await session.in_box("always.txt") == "a\na"  # both calls ran, one asked
        results = session.tool_results("claude")
        assert any(f"no answer within {TIMEOUT_S}s" in r for r in results), results
        assert any(ANSWER in r for r in results), results


async def test_codex_asks_over_the_websocket_and_the_admin_route_answers(served: Served) -> None:
    async with _Open(served, "codex") as session:
        asked = await _deny_then_allow(session, "codex")
        by_admin = await session.next_ask()
        assert _is_bash(by_admin, BY_ADMIN), by_admin
        route = f"/v1/admin/sessions/{session.session}/permissions/{by_admin['request_id']}"
        body = {"decision": "deny", "message": "the operator says no"}
        reply = await session.http.post(
            route, params={"owner": "dev"}, headers=served.keys["ops"].header, json=body
        )
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"request_id": by_admin["request_id"], "status": "answered"}
        await session.end()
        await _check_deny_then_allow(session, "codex", asked)
        resolved = session.resolved()[by_admin["request_id"]]
        assert (resolved["decision"], resolved["by"]) == ("deny", "user")
        assert await session.in_box("admin.txt") is None
        results = session.tool_results("codex")
        assert any("the operator says no" in r for r in results), results


async def test_opencode_asks_over_the_websocket_and_the_http_routes_answer(served: Served) -> None:
    keys = served.keys
    async with _Open(served, "opencode") as session:
        asked = await _deny_then_allow(session, "opencode")
        colour = await session.next_ask()
        assert (colour["text"], tuple(colour["options"])) == _COLOUR, colour
        await session.reply(colour, ANSWER)
        by_admin = await session.next_ask()
        assert _is_bash(by_admin, BY_ADMIN), by_admin
        route = f"/v1/admin/sessions/{session.session}/permissions/{by_admin['request_id']}"
        allow = {"decision": "allow"}
        # refused while it waits: an admin naming another owner, a user on the admin route, another
        # user on the user route
        wrong_owner = await session.http.post(
            route, params={"owner": "eve"}, headers=keys["ops"].header, json=allow
        )
        assert wrong_owner.status_code == 404, wrong_owner.text
        as_user = await session.http.post(
            route, params={"owner": "dev"}, headers=keys["dev"].header, json=allow
        )
        assert as_user.status_code == 403, as_user.text
        user_route = f"/v1/sessions/{session.session}/permissions/{by_admin['request_id']}"
        other_user = await session.http.post(user_route, headers=keys["eve"].header, json=allow)
        assert other_user.status_code == 404, other_user.text
        reply = await session.http.post(
            route, params={"owner": "dev"}, headers=keys["ops"].header, json=allow
        )
        assert reply.status_code == 200, reply.text
        again = await session.http.post(
            route, params={"owner": "dev"}, headers=keys["ops"].header, json=allow
        )
        assert again.status_code == 404, again.text  # answered already
        shape = await session.next_ask()
        assert (shape["text"], tuple(shape["options"])) == _SHAPE, shape
        question_route = f"/v1/sessions/{session.session}/questions/{shape['request_id']}"
        as_permission = await session.http.post(
            user_route.replace(by_admin["request_id"], shape["request_id"]),
            headers=keys["dev"].header,
            json=allow,
        )
        assert as_permission.status_code == 400, as_permission.text  # a question, not a permission
        other = await session.http.post(question_route, headers=keys["eve"].header, json={"answer": "square"})
        assert other.status_code == 404, other.text
        answered = await session.http.post(question_route, headers=keys["dev"].header, json={"answer": SHAPE})
        assert answered.status_code == 200, answered.text
        assert answered.json() == {"request_id": shape["request_id"], "status": "answered"}
        await session.end()
        await _check_deny_then_allow(session, "opencode", asked)
        resolved = session.resolved()[by_admin["request_id"]]
        assert (resolved["decision"], resolved["by"]) == ("allow", "user")
        assert await session.in_box("admin.txt") == "admin"
        results = session.tool_results("opencode")
        assert any(ANSWER in r for r in results) and any(SHAPE in r for r in results), results
        audit = await session.audit("permission.")
        actors = sorted(r["actor"] for r in audit)
        assert actors == sorted([keys["dev"].id] * 2 + [keys["ops"].id]), (
            audit
        )  # the admin's answer is theirs


async def test_tai_asks_over_the_websocket_and_the_admin_question_route_answers(served: Served) -> None:
    keys = served.keys
    async with _Open(served, "tai") as session:
        asked = await _deny_then_allow(session, "tai")
        colour = await session.next_ask()
        assert (colour["text"], tuple(colour["options"])) == _COLOUR, colour
        await session.reply(colour, ANSWER)
        shape = await session.next_ask()
        assert (shape["text"], tuple(shape["options"])) == _SHAPE, shape
        route = f"/v1/admin/sessions/{session.session}/questions/{shape['request_id']}"
        wrong_owner = await session.http.post(
            route, params={"owner": "eve"}, headers=keys["ops"].header, json={"answer": "square"}
        )
        assert wrong_owner.status_code == 404, wrong_owner.text
        reply = await session.http.post(
            route, params={"owner": "dev"}, headers=keys["ops"].header, json={"answer": SHAPE}
        )
        assert reply.status_code == 200, reply.text
        await session.end()
        await _check_deny_then_allow(session, "tai", asked)
        answered = [
            e["props"]
            for e in session.ws.events
            if e["type"] == "event" and e["props"]["event"] == "question/answered"
        ]
        assert [a["request_id"] for a in answered] == [colour["request_id"], shape["request_id"]]
        results = session.tool_results("tai")
        assert any(ANSWER in r for r in results) and any(SHAPE in r for r in results), results
        audit = await session.audit("question.answer")
        by_request = {r["detail"]["request_id"]: r["actor"] for r in audit}
        assert by_request == {colour["request_id"]: keys["dev"].id, shape["request_id"]: keys["ops"].id}, (
            audit
        )


CI_STEPS: list[dict[str, Any]] = [
    {"tool": "Write", "args": {"file_path": "/workspace/blocked.txt", "content": "should never exist"}},
    {"shell": "echo ran > ran.txt"},
    {"text": "done"},
]


def test_cage_run_deny_blocks_a_claude_write_and_reports_it(
    app: App, workspace: Path, tmp_path: Path
) -> None:
    app.server.add_scenario("perm-ci-claude", CI_STEPS)
    assistant = app.assistant("claude", scenario="perm-ci-claude")
    path = app.root / "assistants" / "e2e" / "claude" / "sandbox.yao"
    spec = json.loads(path.read_text())
    spec["permissions"] = {"rules": [{"ask": "write"}]}
    path.write_text(json.dumps(spec))
    out = tmp_path / "out"
    result = cage_run(
        app, assistant, workspace, "write it", extra=["--permissions", "deny", "--output-dir", str(out)]
    )
    assert result.code == 0, result.stderr
    assert not (workspace / "blocked.txt").exists()
    assert (workspace / "ran.txt").read_text() == "ran\n"  # bash is not asked about: bypass
    results = [text for r in app.server.requests.for_scenario("perm-ci-claude") for text in r.tool_results()]
    assert any("no one to ask in CI mode" in r for r in results), results
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert validate_stream(events) == []
    requests = [
        e["props"] for e in events if e["type"] == "event" and e["props"]["event"] == "permission/request"
    ]
    assert [(r["tool"], r["rule"]) for r in requests] == [("write", "ask write")]
    summary = json.loads((out / "summary.json").read_text())
    denied = [p for p in summary["permissions"] if p["decision"] == "deny"]
    assert denied == [
        {
            "request_id": requests[0]["request_id"],
            "tool": "write",
            "decision": "deny",
            "by": "policy",
            "rule": "ask write",
            "message": "refused: no one to ask in CI mode (--permissions deny)",
        }
    ]
    allowed = [
        (p["tool"], p["decision"], p["by"]) for p in summary["permissions"] if p["decision"] == "allow"
    ]
    assert ("bash", "allow", "policy") in allowed  # CI mode reports every decision, allowed ones too
    assert "blocked.txt" not in summary["files_changed"]
