"""Records the Claude Code goldens: the real CLI in its Cage image against the fake model server.

    python -m tests.golden.claude.record [--image cage/claude:<tag>] [scenario ...]

Each scenario runs exactly the exec `ClaudeAdapter.build_exec()` produces (files, argv, env, the
stdin line, the `sandbox` user) with `docker run`, closes stdin after the `result` line as the
bridge does, and stores the raw stdout as `<version>/<scenario>.in.jsonl` plus how the process
ended as `<scenario>.meta.json`; then the expected events are regenerated (review the diff).
Env values are handed to `docker run` through its environment (`-e NAME`), never its argv.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, McpServerSpec
from orchestrator.stream import CountingIds, TurnBuilder
from runners.base import RunnerExec, TurnRequest
from runners.claude import CLI_VERSION, INTERRUPT, ClaudeAdapter
from tests.fakes.model_server.server import FakeModelServer
from tests.golden.claude.replay import ASSISTANT_ID, HERE, write_expected

SANDBOX_UID = 1000
TURN_TIMEOUT = 120.0
SYSTEM_PROMPT = "You are a careful assistant working in /workspace."


@dataclass
class Recording:
    lines: list[str]
    exit_code: int | None
    stderr_tail: str
    cancelled: bool


def find_image() -> str:
    """The newest local `cage/claude` image made for this CLI version."""
    found = subprocess.run(
        [
            "docker",
            "images",
            "--filter",
            "label=cage.runner=claude",
            "--filter",
            f"label=cage.cli-version={CLI_VERSION}",
            "--format",
            "{{.Repository}}:{{.Tag}}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    if not found:
        raise SystemExit("no cage/claude image: build it first (make images)")
    return found[0]


MCP_SECRET = "mcp-golden-secret-42"
MCP_SERVER = McpServerSpec(
    id="orch",
    transport="stdio",
    command="python3",
    args=("/workspace/.cage/mcp_echo.py",),
    env={"ECHO_TOKEN": MCP_SECRET},
)
MCP_STEPS: list[dict[str, Any]] = [
    {"tool": "mcp__orch__report", "args": {"message": "hello"}},
    {"text": "reported"},
]


def make_turn(
    scenario: str,
    url: str,
    *,
    session: str,
    prompt: str,
    resume: dict[str, str] | None = None,
    mcp: tuple[McpServerSpec, ...] = (),
) -> TurnRequest:
    connector = ConnectorSpec(
        id="fake-anthropic",
        label="fake",
        type="anthropic",
        model=f"claude-sonnet-4-5@{scenario}",
        base_url=url,
        key=SecretStr("sk-ant-cage-golden-000000"),
        max_retries=2,
    )
    return TurnRequest(
        assistant_id=ASSISTANT_ID,
        owner="tests",
        session_id=session,
        turn_id=f"t-{uuid.uuid4().hex[:8]}",
        prompt=prompt,
        system_prompt=SYSTEM_PROMPT,
        connector=connector,
        resume=resume or {},
        mcp_servers=mcp,
    )


def _write_files(workspace: Path, spec: RunnerExec) -> None:
    for item in spec.files:
        path = workspace / item.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(item.content, encoding="utf-8")
        path.chmod(item.mode)
    if os.geteuid() == 0:  # the bridge writes as `sandbox`; do the same
        for root, dirs, names in os.walk(workspace):
            for name in [*dirs, *names]:
                os.chown(Path(root) / name, SANDBOX_UID, SANDBOX_UID)


def _pump(stream: IO[bytes], sink: queue.Queue[bytes | None]) -> None:
    for line in stream:
        sink.put(line)
    sink.put(None)


def run_turn(
    image: str,
    workspace: Path,
    turn: TurnRequest,
    *,
    interrupt: Callable[[dict[str, Any]], bool] | None = None,
) -> Recording:
    """Run one turn as the bridge would; `interrupt(message)` True sends the stdin interrupt."""
    spec = ClaudeAdapter().build_exec(turn)
    _write_files(workspace, spec)
    name = f"cage-golden-claude-{uuid.uuid4().hex[:8]}"
    argv = ["docker", "run", "--rm", "-i", "--name", name, "--add-host", "host.docker.internal:host-gateway"]
    argv += ["-u", spec.user, "-v", f"{workspace}:/workspace", "-w", spec.workdir]
    for key in sorted(spec.env):
        argv += ["-e", key]
    argv += [image, *spec.argv]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **spec.env},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    lines_q: queue.Queue[bytes | None] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines_q), daemon=True).start()
    stderr_chunks: list[bytes] = []
    err_thread = threading.Thread(target=lambda: stderr_chunks.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
    err_thread.start()
    proc.stdin.write(spec.stdin or b"")
    proc.stdin.flush()
    lines: list[str] = []
    cancelled = False
    deadline = time.monotonic() + TURN_TIMEOUT
    while True:
        try:
            raw = lines_q.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
            raise SystemExit(f"{name}: no output for {TURN_TIMEOUT}s") from None
        if raw is None:
            break
        line = raw.decode("utf-8").rstrip("\n")
        lines.append(line)
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if interrupt is not None and not cancelled and interrupt(message):
            time.sleep(1.0)  # let the tool start running
            proc.stdin.write(INTERRUPT)
            proc.stdin.flush()
            cancelled = True
        if message.get("type") == "result" and not proc.stdin.closed:
            proc.stdin.close()  # the bridge closes stdin once the translator is `finished`
    exit_code = proc.wait(timeout=30)
    err_thread.join(timeout=5)
    stderr = b"".join(stderr_chunks).decode("utf-8", "replace")
    return Recording(lines, exit_code, stderr[-2000:], cancelled)


def _is_tool_use(message: dict[str, Any]) -> bool:
    content = (message.get("message") or {}).get("content") or []
    return message.get("type") == "assistant" and any(
        isinstance(b, dict) and b.get("type") == "tool_use" for b in content
    )


def _resume_state(recording: Recording, turn: TurnRequest) -> dict[str, str]:
    translator = ClaudeAdapter().translator(TurnBuilder(CountingIds(), runner="claude"), turn)
    for line in recording.lines:
        translator.feed(line)
    return translator.resume_state


def record(scenario: str, image: str, server: FakeModelServer) -> Recording:
    url = server.url_for_containers
    workspace = Path(tempfile.mkdtemp(prefix=f"cage-claude-{scenario}-"))
    workspace.chmod(0o777)
    try:
        if scenario == "resume":
            first = make_turn("hello", url, session="golden-resume", prompt="Create hello.txt")
            state = _resume_state(run_turn(image, workspace, first), first)
            second = make_turn("text", url, session="golden-resume", prompt="Say hello", resume=state)
            return run_turn(image, workspace, second)
        if scenario == "mcp":
            script = workspace / ".cage" / "mcp_echo.py"
            script.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(Path(__file__).with_name("mcp_echo.py"), script)
            turn = make_turn("mcp", url, session="golden-mcp", prompt="Report hello", mcp=(MCP_SERVER,))
            return run_turn(image, workspace, turn)
        if scenario == "cancel":
            turn = make_turn("slow-tool", url, session="golden-cancel", prompt="Sleep for a minute")
            return run_turn(image, workspace, turn, interrupt=_is_tool_use)
        turn = make_turn(scenario, url, session=f"golden-{scenario}", prompt=f"Run the {scenario} scenario")
        return run_turn(image, workspace, turn)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


SCENARIOS = ("hello", "thinking", "text", "error500", "error401", "resume", "cancel", "mcp")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.golden.claude.record", description=__doc__)
    parser.add_argument("--image", help="runner image (default: the newest local cage/claude)")
    parser.add_argument("scenarios", nargs="*", help=f"some of {', '.join(SCENARIOS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = set(args.scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    image = args.image or find_image()
    folder = HERE / CLI_VERSION
    folder.mkdir(exist_ok=True)
    with FakeModelServer("hello") as server:
        server.add_scenario("mcp", MCP_STEPS)
        for scenario in args.scenarios or SCENARIOS:
            recording = record(scenario, image, server)
            case = folder / f"{scenario}.in.jsonl"
            case.write_text("".join(line + "\n" for line in recording.lines), encoding="utf-8")
            meta = {
                "exit_code": recording.exit_code,
                "stderr_tail": recording.stderr_tail,
                "cancelled": recording.cancelled,
                "image": image,
            }
            (folder / f"{scenario}.meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
            write_expected(case)
            print(f"{scenario}: {len(recording.lines)} lines, exit {recording.exit_code}")


if __name__ == "__main__":
    main()
