"""Record the codex goldens: the real Codex CLI in its Cage image against the fake model server.

    python -m tests.golden.codex.record [--image cage/codex:<tag>] [--only hello,resume]

Each scenario runs exactly what `CodexAdapter.build_exec` returns (argv, env, files, user, workdir,
stdin) with `docker run --rm --init -u sandbox -v <tmp>:/workspace`; secret env values are passed
through this process's environment (`-e NAME`), never on the docker command line. codex's stdout is
stored as `<version>/<scenario>.in.jsonl`, how it ended as `<scenario>.meta.json`, and the
translation as `<scenario>.out.jsonl` (review the diff). Needs a Docker engine and a built
`cage/codex` image (`docker images --filter label=cage.runner=codex`); it never builds one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, McpServerSpec
from orchestrator.dsl.connectors import ConnectorType
from runners.base import RunnerExec, TurnRequest
from runners.codex import CLI_VERSION, CodexAdapter
from tests.fakes.model_server.scenario import Scenario, scenario
from tests.fakes.model_server.server import FakeModelServer
from tests.golden.codex.replay import HERE, golden_turn, replay, write_expected

SANDBOX_UID = 1000
GOLDEN_KEY = "cage-golden-key-0000"
MCP_SCRIPT = ".cage/mcp/echo.py"
BUNDLED_MODEL = "gpt-5.5"
"""A slug codex has metadata for: `apply_patch` is offered and there is no warning item."""

EXTRA_SCENARIOS: tuple[Scenario, ...] = (
    scenario(
        "tools",
        [
            {
                "parts": [
                    {"thinking": "I will echo, then run a command that fails."},
                    {"tool": "mcp__echo__echo", "args": {"text": "hi there"}},
                ]
            },
            {"shell": "echo oops >&2; exit 3"},
            {"text": "all done"},
        ],
    ),
    scenario(
        "patch",
        [
            {
                "tool": "apply_patch",
                "input": "*** Begin Patch\n*** Add File: notes.txt\n+first line\n*** End Patch\n",
            },
            {"text": "patched"},
        ],
    ),
    scenario(
        "collab",
        [{"tool": "multi_agent_v1__spawn_agent", "args": {"message": "say hi"}}, {"text": "spawned"}],
    ),
)


@dataclass
class Run:
    """One scenario to record."""

    name: str
    model: str
    prompt: str = "Create hello.txt, then say done."
    mcp: bool = False
    cancel_after_turn_start: float | None = None
    before: Callable[[FakeModelServer], object] | None = None
    setup: Callable[[Path, FakeModelServer], dict[str, str]] | None = None
    """Runs earlier turns in the same workspace; returns the resume state for the recorded one."""
    resume: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    stdout: str
    exit_code: int | None
    stderr: str
    cancelled: bool


def _image(explicit: str | None) -> str:
    if explicit:
        return explicit
    out = subprocess.run(
        [
            "docker",
            "images",
            "--filter",
            "label=cage.runner=codex",
            "--filter",
            f"label=cage.cli-version={CLI_VERSION}",
            "--format",
            "{{.Repository}}:{{.Tag}}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    if not out:
        raise SystemExit(f"no cage/codex image for codex {CLI_VERSION}; build one first (make images)")
    return out[0]


def _turn(
    name: str, model: str, server: FakeModelServer, prompt: str, *, mcp: bool, resume: Mapping[str, str]
) -> TurnRequest:
    connector = ConnectorSpec(
        id="fake",
        label="fake",
        type=ConnectorType.OPENAI,
        model=model,
        base_url=server.url_for_containers,
        key=SecretStr(GOLDEN_KEY),
        max_retries=1,
    )
    servers = (
        (
            McpServerSpec(
                id="echo",
                transport="stdio",
                command="python3",
                args=(f"/workspace/{MCP_SCRIPT}",),
                env={"ECHO_SUFFIX": "(env passed)"},
                timeout=timedelta(seconds=30),
            ),
        )
        if mcp
        else ()
    )
    base = golden_turn(name, resume)
    return base.model_copy(
        update={
            "prompt": prompt,
            "connector": connector,
            "mcp_servers": servers,
            "system_prompt": "You are a test assistant. Keep answers short.",
        }
    )


def _write_files(workspace: Path, rexec: RunnerExec) -> None:
    for f in rexec.files:
        target = workspace / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f.content, encoding="utf-8")
        target.chmod(f.mode)
    for path in [workspace, *workspace.rglob("*")]:
        os.chown(path, SANDBOX_UID, SANDBOX_UID)


def _docker_argv(image: str, name: str, workspace: Path, rexec: RunnerExec) -> list[str]:
    argv = [
        "docker",
        "run",
        "--rm",
        "--init",
        "-i",
        "--name",
        name,
        "--add-host",
        "host.docker.internal:host-gateway",
        "-u",
        rexec.user,
        "-w",
        rexec.workdir,
        "-v",
        f"{workspace}:/workspace",
    ]
    for key, value in rexec.env.items():
        argv += ["-e", key] if key in rexec.secret_env else ["-e", f"{key}={value}"]
    return [*argv, image, *rexec.argv]


def _exec(image: str, workspace: Path, rexec: RunnerExec, cancel_after: float | None) -> Result:
    name = f"cage-golden-codex-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, **{k: rexec.env[k] for k in rexec.secret_env}}
    proc = subprocess.Popen(
        _docker_argv(image, name, workspace, rexec),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    if rexec.stdin:
        proc.stdin.write(rexec.stdin)
    proc.stdin.close()  # stdin=None means /dev/null: codex sees EOF at once
    stderr: list[bytes] = []
    reader = threading.Thread(target=lambda: stderr.append(proc.stderr.read() if proc.stderr else b""))
    reader.start()
    lines: list[bytes] = []
    cancelled = False
    for line in proc.stdout:
        lines.append(line)
        if cancel_after is not None and b'"turn.started"' in line and not cancelled:
            time.sleep(cancel_after)
            subprocess.run(["docker", "kill", "--signal", "INT", name], check=True, capture_output=True)
            cancelled = True
    exit_code = proc.wait(timeout=120)
    reader.join()
    return Result(b"".join(lines).decode(), exit_code, b"".join(stderr).decode(errors="replace"), cancelled)


def _record_turn(image: str, workspace: Path, turn: TurnRequest, cancel_after: float | None) -> Result:
    rexec = CodexAdapter().build_exec(turn)
    _write_files(workspace, rexec)
    return _exec(image, workspace, rexec, cancel_after)


def _first_turn(image: str) -> Callable[[Path, FakeModelServer], dict[str, str]]:
    """An earlier `hello` turn in the same workspace; its translator's resume state."""

    def run(workspace: Path, server: FakeModelServer) -> dict[str, str]:
        from orchestrator.stream import CountingIds, TurnBuilder

        turn = _turn(
            "resume", "fake-model@hello", server, "Create hello.txt, then say done.", mcp=False, resume={}
        )
        result = _record_turn(image, workspace, turn, None)
        translator = CodexAdapter().translator(TurnBuilder(CountingIds()), turn)
        for line in result.stdout.splitlines():
            translator.feed(line)
        translator.close(result.exit_code, result.stderr)
        return translator.resume_state

    return run


def runs(image: str) -> list[Run]:
    return [
        Run("hello", "fake-model@hello"),
        Run("thinking", "fake-model@thinking", prompt="What is the answer?"),
        Run("error500", "fake-model@error500", prompt="Say hi."),
        Run("error401", "fake-model@error401", prompt="Say hi."),
        Run("resume", "fake-model@hello", prompt="Do it again.", setup=_first_turn(image)),
        Run(
            "resume_lost",
            "fake-model@hello",
            prompt="Go on.",
            resume={"thread_id": "01a22800-0000-7000-8000-000000000000", "usage_input_tokens": "100"},
        ),
        Run("cancelled", "fake-model@hang", prompt="Tell me a long story.", cancel_after_turn_start=1.5),
        Run("tools", "fake-model@tools", prompt="Echo hi there, then run the failing command.", mcp=True),
        Run("patch", BUNDLED_MODEL, prompt="Add notes.txt.", before=lambda s: s.set_scenario("patch")),
        Run("collab", "fake-model@collab", prompt="Spawn a helper agent."),
        Run("long_prompt", "fake-model@text", prompt="Please read all of this. " + "lorem ipsum " * 12_000),
    ]


def record(run: Run, image: str, server: FakeModelServer, out_dir: Path) -> None:
    server.set_scenario("hello")
    if run.before is not None:
        run.before(server)
    workspace = Path(tempfile.mkdtemp(prefix=f"codex-golden-{run.name}-"))
    try:
        workspace.chmod(0o755)
        resume = run.setup(workspace, server) if run.setup is not None else dict(run.resume)
        turn = _turn(run.name, run.model, server, run.prompt, mcp=run.mcp, resume=resume)
        if run.mcp:
            script = workspace / MCP_SCRIPT
            script.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(HERE / "mcp_echo.py", script)
        result = _record_turn(image, workspace, turn, run.cancel_after_turn_start)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    case = out_dir / f"{run.name}.in.jsonl"
    case.write_text(result.stdout, encoding="utf-8")
    meta: dict[str, Any] = {
        "cli_version": CLI_VERSION,
        "model": run.model,
        "exit_code": result.exit_code,
        "stderr_tail": result.stderr[-2000:],
        "cancelled": result.cancelled,
        "resume": resume,
    }
    case.with_name(f"{run.name}.meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    write_expected(case)
    _, outcome, _ = replay(case)
    print(f"{run.name}: exit {result.exit_code}, outcome {outcome.status}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden.codex.record", description=__doc__)
    parser.add_argument(
        "--image", help="runner image tag (default: the newest cage/codex for this CLI version)"
    )
    parser.add_argument("--host", default="172.17.0.1", help="address the fake model server binds (docker0)")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    args = parser.parse_args(argv)
    image = _image(args.image)
    wanted = {n for n in args.only.split(",") if n}
    out_dir = HERE / CLI_VERSION
    out_dir.mkdir(exist_ok=True)
    with FakeModelServer("hello", host=args.host) as server:
        for extra in EXTRA_SCENARIOS:
            server.add_scenario(extra.name, extra)
        for run in runs(image):
            if not wanted or run.name in wanted:
                record(run, image, server, out_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
