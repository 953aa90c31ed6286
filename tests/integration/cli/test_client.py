"""The client library and the terminal commands on it, against a real `cage serve` on the fake
model: `cage session` in a real pseudo-terminal (a turn, an interrupt, quitting), `cage sessions`,
`cage logs`, `cage ps`, `cage rm`, and a websocket reconnect that replays without gap or duplicate."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pexpect
import pytest

from orchestrator.client import CageApiError, CageClient
from orchestrator.client.session import is_turn_end
from tests.fakes.model_server import FakeModelServer
from tests.serving import reserve_port
from tests.subprocess_env import EGRESS_VAR, subprocess_env

CAGE = [sys.executable, "-m", "orchestrator.cli"]
ADMIN_KEY = "cage-test-bootstrap-admin-key-0123456789"


@dataclass
class Server:
    url: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, test_run_labels: dict[str, str]) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("client")
    with FakeModelServer("text", host="127.0.0.1") as model:
        model.add_scenario("story", [{"text": "once upon a time " + "and then " * 60, "delay": 0.3}])
        base = subprocess_env(keep={EGRESS_VAR})
        subprocess.run(
            [*CAGE, "init", "app", "--host", model.url, "--model", "claude-sonnet-4-5@text"],
            cwd=root,
            env=base,
            check=True,
            capture_output=True,
        )
        app = root / "app"
        (app / "connectors" / "slow.conn.yao").write_text(
            json.dumps(
                {
                    "label": "slow",
                    "type": "anthropic",
                    "options": {
                        "model": "claude-sonnet-4-5@story",
                        "key": "$ENV.ANTHROPIC_API_KEY",
                        "host": model.url,
                    },
                }
            )
        )
        (app / "assistants" / "app" / "slow").mkdir()
        (app / "assistants" / "app" / "slow" / "package.yao").write_text(
            json.dumps({"name": "Slow", "connector": "slow"})
        )
        (app / "assistants" / "app" / "slow" / "prompts.yml").write_text(
            "- role: system\n  content: Be slow.\n"
        )
        box = app / "assistants" / "app" / "box"
        shutil.copytree(app / "assistants" / "app" / "coder", box)
        (box / "sandbox.yao").write_text(
            json.dumps({"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session"})
        )
        port = reserve_port()
        env = {
            **base,
            "ANTHROPIC_API_KEY": "sk-fake-client-key-123456",
            "CAGE_BOOTSTRAP_ADMIN_KEY": ADMIN_KEY,
            "CAGE_SANDBOX_LABELS": json.dumps(test_run_labels),
        }
        log = (root / "serve.log").open("wb")
        proc = subprocess.Popen(
            [*CAGE, "serve", "--port", str(port)], cwd=app, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, (root / "serve.log").read_text()
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        try:
            yield Server(url, {**base, "CAGE_URL": url, "CAGE_KEY": ADMIN_KEY})
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            log.close()


def _cage(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CAGE, *args], env=server.env, capture_output=True, text=True, timeout=120)


def test_session_in_a_terminal_a_turn_an_interrupt_and_quitting(server: Server) -> None:
    child = pexpect.spawn(
        CAGE[0],
        [*CAGE[1:], "chat", "app.slow", "--session", "pty-1"],
        env=server.env,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 120),
    )
    child.expect("session pty-1")
    child.expect("you> ")
    child.sendline("tell me a long story")
    child.expect("once upon")  # a slow story: a word every 0.3 s
    child.sendintr()  # Ctrl-C during the turn: interrupt it, keep the session
    child.expect("interrupting the turn")
    child.expect(r"\[cancelled")
    child.expect("you> ")
    child.sendintr()  # Ctrl-C at the prompt: quit
    child.expect("bye")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    again = pexpect.spawn(
        CAGE[0],
        [*CAGE[1:], "chat", "app.chat", "--session", "pty-2"],
        env=server.env,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 120),
    )
    again.expect("you> ")
    again.sendline("hi")
    again.expect("Hello from the fake model.")
    again.expect(r"\[completed")
    again.expect("you> ")
    again.sendeof()  # Ctrl-D quits too
    again.expect("bye")
    again.expect(pexpect.EOF)
    again.close()
    assert again.exitstatus == 0


def test_operator_commands(server: Server) -> None:
    listed = _cage(server, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    ids = {s["id"]: s for s in json.loads(listed.stdout)}
    assert {"pty-1", "pty-2"} <= set(ids) and ids["pty-2"]["assistant_id"] == "app.chat"
    logs = _cage(server, "logs", "pty-2", "--json")
    assert logs.returncode == 0, logs.stderr
    events = [json.loads(line) for line in logs.stdout.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert is_turn_end(events[-1]) and events[-1]["props"]["status"] == "completed"
    rendered = _cage(server, "logs", "pty-2")
    assert "Hello from the fake model." in rendered.stdout and "[completed" in rendered.stdout
    boxes = _cage(server, "ps", "--json")
    assert boxes.returncode == 0 and json.loads(boxes.stdout) == []  # LLM mode: no sandbox
    missing = _cage(server, "rm", "no-such-box")
    assert missing.returncode == 1 and "HTTP 404" in missing.stderr and "Traceback" not in missing.stderr
    no_key = subprocess.run([*CAGE, "ps"], env={**server.env, "CAGE_KEY": ""}, capture_output=True, text=True)
    assert no_key.returncode == 2 and "CAGE_KEY" in no_key.stderr


async def test_a_reconnect_replays_exactly_the_missed_events(server: Server) -> None:
    async with CageClient(server.url, ADMIN_KEY) as client:
        seen: list[dict[str, Any]] = []
        async with client.session("lib-1", assistant_id="app.chat") as session:
            await session.send("hi")
            async for frame in session.frames():
                if "seq" in frame:
                    seen.append(frame)
                if len(seen) == 3:
                    break  # leave in the middle of the turn
        async with client.session("lib-1", after_seq=seen[-1]["seq"]) as session:
            async for frame in session.turn():
                if "seq" in frame:
                    seen.append(frame)
        logged = [e async for e in client.history("lib-1")]
        assert [e["seq"] for e in seen] == [e["seq"] for e in logged]  # no gap, no duplicate
        assert seen == logged
        assert is_turn_end(seen[-1])
        with pytest.raises(CageApiError) as refused:
            await client.get_session("no-such-session")
        assert refused.value.status == 404
    async with CageClient(server.url, "cage_not_a_key") as stranger:
        with pytest.raises(CageApiError) as unauthorized:
            await stranger.sessions()
        assert unauthorized.value.status == 401


@pytest.mark.slow
async def test_ps_exec_and_rm_on_a_real_sandbox(server: Server) -> None:
    session = f"box-{uuid.uuid4().hex[:8]}"
    async with (
        CageClient(server.url, ADMIN_KEY) as client,
        client.session(session, assistant_id="app.box") as s,
    ):
        await s.send("hi")
        events = [frame async for frame in s.turn()]
    assert events[-1]["props"]["status"] == "completed", events[-1]
    listed = _cage(server, "ps", "--json")
    [box] = [b for b in json.loads(listed.stdout) if b["assistant_id"] == "app.box"]
    try:
        _exec_and_rm(server, box)
    finally:
        _cage(server, "rm", box["name"])  # never leave the box behind, whatever failed


def _exec_and_rm(server: Server, box: dict[str, Any]) -> None:
    assert box["lifecycle"] == "session" and box["status"] in ("idle", "busy")
    assert box["name"] in _cage(server, "ps").stdout
    script = "echo hi from $(id -un); echo oops >&2; exit 3"
    ran = _cage(server, "exec", box["name"], "--", "sh", "-c", script)
    assert ran.returncode == 3, ran.stderr
    assert ran.stdout.strip() == "hi from sandbox" and "oops" in ran.stderr
    removed = _cage(server, "rm", box["name"])
    assert removed.returncode == 0 and f"removed {box['name']}" in removed.stdout
    after = _cage(server, "ps", "--json")
    assert box["name"] not in {b["name"] for b in json.loads(after.stdout)}
