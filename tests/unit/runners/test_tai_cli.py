"""`cage-tai run` as a real subprocess on a temp dir, against the in-process fake model server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.stream import validate_stream
from runners.native_loop.options import NativeOptions
from runners.tai import TaiTurn
from runners.tai.turn import KEY_ENV, TaiModel
from tests.fakes.model_server import FakeModelServer

CAGE_TAI = [sys.executable, "-m", "runners.tai.incontainer.cli", "run"]
KEY = "sk-tai-unit-secret-7781"
FIX: list[dict[str, Any]] = [
    {"tool": "read", "args": {"path": "calc.py"}},
    {"tool": "edit", "args": {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}},
    {"shell": "python3 -c 'import calc; assert calc.add(2, 3) == 5; print(\"tests passed\")'"},
    {"text": "Fixed add(); the tests pass."},
]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="127.0.0.1") as running:
        running.add_scenario("fix", FIX)
        running.add_scenario("sleepy", [{"shell": "sleep 77.5"}, {"text": "never"}])
        running.add_scenario("delegate", [{"tool": "agent", "args": {"prompt": "survey"}}, {"text": "done"}])
        running.add_scenario("env", [{"shell": f"echo key=[${KEY_ENV}] home=[$HOME]"}, {"text": "ok"}])
        yield running


def turn(server: FakeModelServer, scenario: str, workdir: Path, **extra: Any) -> TaiTurn:
    return TaiTurn(
        assistant_id="unit.tai",
        session_id="chat-unit",
        turn_id=extra.pop("turn_id", "turn-1"),
        prompt=extra.pop("prompt", "fix the add function"),
        system="You are a careful coding agent.",
        model=TaiModel(provider="anthropic", model=f"fake@{scenario}", base_url=server.url, max_retries=0),
        workdir=str(workdir),
        **extra,
    )


def env() -> dict[str, str]:
    return {**os.environ, KEY_ENV: KEY}


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_a_turn_reads_edits_runs_the_tests_and_answers(server: FakeModelServer, tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    document = turn(server, "fix", tmp_path, checkpoint_dir=str(tmp_path / ".ckpt"))
    done = subprocess.run(
        CAGE_TAI, input=document.model_dump_json(), env=env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    events = events_of(done.stdout)
    assert validate_stream(events, stamped=False) == []
    assert events[0]["props"]["event"] == "stream_start" and events[0]["props"]["runner"] == "tai"
    end = events[-1]["props"]
    assert end["event"] == "stream_end" and end["status"] == "completed"
    assert end["usage"]["output_tokens"] > 0
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    finished = [e["props"] for e in events if e["type"] == "execute" and e["props"].get("status")]
    assert [p["tool"] for p in finished if p["status"] == "running"] == ["read", "edit", "bash"]
    outputs = [p.get("output", "") for p in finished if p["status"] == "completed"]
    assert len(outputs) == 3 and "return a - b" in outputs[0] and "tests passed" in outputs[2]
    answer = "".join(e["props"]["content"] for e in events if e["type"] == "text")
    assert answer == "Fixed add(); the tests pass."
    (summary,) = [e["props"] for e in events if e["props"].get("event") == "result/summary"]
    assert summary["num_turns"] == 4 and summary["stop_reason"] == "completed"
    checkpoint = json.loads((tmp_path / ".ckpt" / "turn-1.json").read_text())
    assert checkpoint["phase"] == "done" and checkpoint["round"] == 4
    assert KEY not in done.stdout + done.stderr


def test_a_second_turn_resumes_from_the_first_turns_checkpoint(
    server: FakeModelServer, tmp_path: Path
) -> None:
    ckpt = str(tmp_path / ".ckpt")
    first = turn(server, "text", tmp_path, checkpoint_dir=ckpt, prompt="remember PINEAPPLE-42")
    run1 = subprocess.run(CAGE_TAI, input=first.model_dump_json(), env=env(), capture_output=True, text=True)
    assert run1.returncode == 0, run1.stderr
    second = turn(server, "text", tmp_path, checkpoint_dir=ckpt, turn_id="turn-2", resume_turn_id="turn-1")
    before = len(server.requests.all())
    run2 = subprocess.run(CAGE_TAI, input=second.model_dump_json(), env=env(), capture_output=True, text=True)
    assert run2.returncode == 0, run2.stderr
    (request,) = server.requests.all()[before:]
    assert "PINEAPPLE-42" in json.dumps(request.body) and "fix the add function" in json.dumps(request.body)


def test_sigint_cancels_the_turn_kills_the_tool_and_exits_130(
    server: FakeModelServer, tmp_path: Path
) -> None:
    document = turn(server, "sleepy", tmp_path)
    proc = subprocess.Popen(
        CAGE_TAI, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(), text=True
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(document.model_dump_json())
    proc.stdin.close()
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        if '"status":"running"' in line:
            break
    time.sleep(0.3)  # the sleep is started by now
    assert _processes_running("sleep 77.5")
    proc.send_signal(signal.SIGINT)
    rest = proc.stdout.read()
    code = proc.wait(timeout=30)
    stderr = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert code == 130, stderr
    events = events_of("".join(lines) + rest)
    assert validate_stream(events, stamped=False) == []
    assert events[-1]["props"]["status"] == "cancelled"
    bash_end = [e["props"] for e in events if e["type"] == "execute" and e["props"].get("status") == "error"]
    assert bash_end and bash_end[0]["output"] == "cancelled"
    assert not _processes_running("sleep 77.5")


def test_tools_do_not_see_the_model_key(server: FakeModelServer, tmp_path: Path) -> None:
    document = turn(server, "env", tmp_path)
    done = subprocess.run(
        CAGE_TAI, input=document.model_dump_json(), env=env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    (output,) = [
        e["props"]["output"]
        for e in events_of(done.stdout)
        if e["type"] == "execute" and e["props"].get("status") == "completed"
    ]
    assert output.startswith("key=[] home=[/")


def test_bad_input_exits_2_without_events(tmp_path: Path) -> None:
    done = subprocess.run(CAGE_TAI, input='{"v": 1, "prompt": ""}', env=env(), capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "bad turn document" in done.stderr


def _processes_running(needle: str) -> bool:
    for status in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if needle in status.read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                return True
        except OSError:
            continue
    return False


def test_the_sub_agents_get_the_configured_system_prompt(server: FakeModelServer, tmp_path: Path) -> None:
    system = "SUBSYS-5521: you survey the repository and answer in one line."
    options = NativeOptions(agent_system=system)
    document = turn(server, "delegate", tmp_path, prompt="delegate a survey", options=options)
    before = len(server.requests.all())
    done = subprocess.run(
        CAGE_TAI, input=document.model_dump_json(), env=env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    systems = [json.dumps(r.body.get("system")) for r in server.requests.all()[before:]]
    # parent, sub-agent, parent again: only the sub-agent's request carries the configured prompt
    assert len(systems) == 3
    assert [system in s for s in systems] == [False, True, False]
    assert all("careful coding agent" not in s for s in systems if system in s)
