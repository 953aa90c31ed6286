"""The package's MCP servers, options, `mcp.options.max_turn` and compaction reach `cage-tai run`:
the adapter's document (built from a `TurnRequest`, secrets only in the env), then the real CLI
as a subprocess against the fake model server with the stdlib `bare` MCP server over stdio.
(In a container: `tests/integration/native/test_native_package.py`.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.dsl import ConnectorSpec, ConnectorType, McpServerSpec
from orchestrator.dsl.package import CompactionSettings, PackageOptions
from runners.base import TurnRequest
from runners.tai import TaiAdapter
from runners.tai.turn import KEY_ENV, MCP_ENV_PREFIX
from tests.fakes.mcp_servers import bare
from tests.fakes.model_server import FakeModelServer

CAGE_TAI = [sys.executable, "-m", "runners.tai.incontainer.cli", "run"]
BARE = Path(bare.__file__)
SECRET = "mcp-env-secret-5512"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="127.0.0.1") as running:
        running.add_scenario(
            "mcp",
            [
                {"tool": "bare__whereami", "args": {}},
                {"tool": "bare__echo", "args": {"text": "hello"}},
                {"text": "done"},
            ],
        )
        running.add_scenario("loop", [{"shell": f"echo {n}"} for n in range(6)] + [{"text": "never"}])
        running.add_scenario("plain", [{"text": "ok"}])
        yield running


def request(server: FakeModelServer, scenario: str, tmp_path: Path, **extra: Any) -> TurnRequest:
    connector = ConnectorSpec(
        id="main",
        label="main",
        type=ConnectorType.ANTHROPIC,
        model=f"fake@{scenario}",
        base_url=server.url,
        max_retries=0,
    )
    return TurnRequest(
        assistant_id="unit.tai",
        owner="o",
        session_id="chat-1",
        turn_id="turn-1",
        prompt="go",
        connector=connector,
        workdir=str(tmp_path),
        state_dir=str(tmp_path / ".state"),
        **extra,
    )


def run(turn: TurnRequest) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    exec_ = TaiAdapter().build_exec(turn)
    assert exec_.stdin is not None
    env = {**os.environ, **exec_.env, KEY_ENV: "k"}
    done = subprocess.run(
        CAGE_TAI, input=exec_.stdin.decode(), env=env, capture_output=True, text=True, timeout=120
    )
    return done, [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def bare_server(tmp_path: Path, tools: tuple[str, ...]) -> McpServerSpec:
    return McpServerSpec(
        id="bare",
        transport="stdio",
        command=sys.executable,
        args=(str(BARE), str(tmp_path / "mcp-state")),
        env={"BARE_TOKEN": SECRET},
        tools=tools,
    )


def test_listed_mcp_tools_are_offered_and_called_and_the_secret_stays_in_the_env(
    server: FakeModelServer, tmp_path: Path
) -> None:
    turn = request(server, "mcp", tmp_path, mcp_servers=(bare_server(tmp_path, ("whereami", "echo")),))
    exec_ = TaiAdapter().build_exec(turn)
    assert exec_.stdin is not None and SECRET not in exec_.stdin.decode()  # the document names a variable
    assert [k for k in exec_.secret_env if k.startswith(MCP_ENV_PREFIX)] == [f"{MCP_ENV_PREFIX}0_0"]
    done, events = run(turn)
    assert done.returncode == 0, done.stderr
    body = server.requests.for_scenario("mcp")[0].body
    offered = {t["name"] for t in body["tools"]}
    assert {"bare__whereami", "bare__echo", "bash"} <= offered and "bare__secret" not in offered
    results = [
        e["props"] for e in events if e["type"] == "execute" and e["props"].get("status") == "completed"
    ]
    where = json.loads(results[0]["output"])
    assert where["pid"] != os.getpid()  # a child of the CLI
    assert results[1]["output"] == "hello"
    calls = (tmp_path / "mcp-state" / "calls.log").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["whereami", "echo"]
    assert SECRET not in done.stdout + done.stderr


def test_package_options_go_on_every_request(server: FakeModelServer, tmp_path: Path) -> None:
    options = PackageOptions.model_validate(
        {
            "temperature": 0.3,
            "top_p": 0.8,
            "stop": ["END"],
            "max_tokens": 555,
            "top_k": 9,
            "model": "fake@plain",
        }
    )
    done, _ = run(request(server, "nothing", tmp_path, package_options=options))
    assert done.returncode == 0, done.stderr
    body = server.requests.for_scenario("plain")[-1].body
    assert (
        body["temperature"],
        body["top_p"],
        body["stop_sequences"],
        body["max_tokens"],
        body["top_k"],
    ) == (0.3, 0.8, ["END"], 555, 9)


def test_max_turn_from_mcp_options_bounds_the_rounds(server: FakeModelServer, tmp_path: Path) -> None:
    done, events = run(request(server, "loop", tmp_path, max_turn=3))
    assert done.returncode == 1
    (summary,) = [e["props"] for e in events if e["props"].get("event") == "result/summary"]
    assert summary["stop_reason"] == "max_rounds" and summary["num_turns"] == 3


def test_compaction_is_on_by_default_with_a_budget_from_the_connector(
    server: FakeModelServer, tmp_path: Path
) -> None:
    history = tuple(
        {"role": role, "content": f"{role} {n}: " + "lorem ipsum " * 200}
        for n in range(10)
        for role in ("user", "assistant")
    )
    turn = request(
        server, "plain", tmp_path, history=history, compaction=CompactionSettings(budget_tokens=1500)
    )
    before = len(server.requests.for_scenario("plain"))
    done, _ = run(turn)
    assert done.returncode == 0, done.stderr
    summary, answer = server.requests.for_scenario("plain")[before:]
    assert "tools" not in summary.body  # the summary call
    assert len(json.dumps(answer.body["messages"])) // 4 < 1500
    off = request(server, "plain", tmp_path, history=history, compaction=CompactionSettings(enabled=False))
    before = len(server.requests.for_scenario("plain"))
    done, _ = run(off)
    (whole,) = server.requests.for_scenario("plain")[before:]
    assert len(whole.body["messages"]) == 21
