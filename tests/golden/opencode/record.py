"""Record opencode goldens with the real CLI: `python -m tests.golden.opencode.record [name ...]`.

Every scenario runs the real opencode in its Cage image (`cage/opencode:<hash>`, built or found by
the image builder) against the fake model server, with exactly the argv, env, stdin and files
`OpencodeAdapter.build_exec` produces, as the `sandbox` user in a throw-away container. Raw stdout
becomes `<version>/<scenario>.in.jsonl`, how the turn ended `<scenario>.meta.json`, and the
translator's events `<scenario>.out.jsonl` (review them before committing). `--replay` only
rewrites the `.out.jsonl` files from the recorded inputs.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import anyio
from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, ConnectorType
from orchestrator.redaction import redact
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.settings import Settings
from runners.base import RunnerExec, TurnRequest
from runners.opencode import OpencodeAdapter
from tests.fakes.model_server import FakeModelServer
from tests.golden.opencode.replay import HERE, dump, regenerate, replay_lines

VERSION = "1.18.33"
GOLDEN_KEY = "sk-cage-golden-not-a-real-key-0123456789"
SANDBOX_UID = 1000
Trigger = Callable[[list[str]], bool]


@dataclass(frozen=True)
class Scenario:
    name: str
    drive: str
    """`run` (oneshot lifecycle) or `serve` (session lifecycle)."""
    model: str
    """The fake server's scenario, as `fake-model@<scenario>`."""
    kind: ConnectorType = ConnectorType.OPENAI
    warmup: tuple[str, ...] = ()
    """Scenarios of earlier turns in the same container and session (their output is not kept)."""
    cancel_when: Trigger | None = None
    """Send SIGINT to the turn's process once the stdout so far satisfies this."""
    system_prompt: str = "You are a careful coding assistant. Keep answers short."
    extra: dict[str, str] = field(default_factory=dict)


def _after(seconds: float) -> Trigger:
    start: list[float] = []

    def trigger(_lines: list[str]) -> bool:
        if not start:
            start.append(time.monotonic())
        return time.monotonic() - start[0] > seconds

    return trigger


def _tool_running(lines: list[str]) -> bool:
    return any('"status":"running"' in line for line in lines)


SCENARIOS = [
    Scenario("hello", "run", "hello"),
    Scenario("thinking", "run", "thinking", kind=ConnectorType.ANTHROPIC),
    Scenario("error500", "run", "fast500"),
    Scenario("error401", "run", "error401"),
    Scenario("resume", "run", "text", warmup=("hello",)),
    Scenario("cancelled", "run", "slow-tool", cancel_when=_after(6.0)),
    Scenario("serve_hello", "serve", "hello"),
    Scenario("serve_thinking", "serve", "thinking"),
    Scenario("serve_error500", "serve", "fast500"),
    Scenario("serve_resume", "serve", "text", warmup=("hello",)),
    Scenario("serve_cancelled", "serve", "slow-tool", cancel_when=_tool_running),
]


def _image(build: bool) -> str:
    """The newest opencode image of this CLI version; with `build`, whatever the builder ensures."""
    if build:

        async def ensure() -> str:
            return (await DockerImageBuilder(Settings()).ensure("opencode")).tag

        return anyio.run(ensure)
    found = subprocess.run(
        ["docker", "images", "--filter", f"label=cage.cli-version={VERSION}", "--format", "{{.Repository}}:{{.Tag}}",
         "cage/opencode"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()  # fmt: skip
    if not found:
        raise SystemExit("no cage/opencode image: build it (make images) or pass --build")
    return found[0]


def _connector(scenario: Scenario, model: str, url: str) -> ConnectorSpec:
    return ConnectorSpec(
        id="fake",
        label="fake",
        type=scenario.kind,
        model=f"fake-model@{model}",
        base_url=url,
        key=SecretStr(GOLDEN_KEY),
    )


def _turn(scenario: Scenario, model: str, url: str, resume: dict[str, str], index: int) -> TurnRequest:
    return TurnRequest(
        assistant_id="golden.opencode",
        owner="golden",
        session_id=f"chat-{scenario.name}",
        turn_id=f"turn-{index}",
        prompt="Write hello.txt, then say done." if model == "hello" else "Answer briefly.",
        system_prompt=scenario.system_prompt,
        connector=_connector(scenario, model, url),
        lifecycle="oneshot" if scenario.drive == "run" else "session",
        resume=resume,
    )


def _write_files(workspace: Path, rexec: RunnerExec) -> None:
    for item in rexec.files:
        path = workspace / item.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(item.content, encoding="utf-8")
        path.chmod(item.mode)
    for root, dirs, files in os.walk(workspace):
        for name in (*dirs, *files):
            os.chown(Path(root) / name, SANDBOX_UID, SANDBOX_UID)


@dataclass
class _Result:
    lines: list[str]
    exit_code: int | None
    stderr: str
    cancelled: bool


def _read_lines(stream: IO[bytes], sink: list[str]) -> None:
    for raw in iter(stream.readline, b""):
        sink.append(raw.decode("utf-8", errors="replace").rstrip("\n"))


def _read_all(stream: IO[bytes], sink: list[bytes]) -> None:
    sink.append(stream.read())


def _exec(container: str, rexec: RunnerExec, env_file: Path, cancel_when: Trigger | None) -> _Result:
    env_file.write_text("".join(f"{k}={v}\n" for k, v in rexec.env.items()), encoding="utf-8")
    wrapper = 'echo $$ > /tmp/cage-turn.pid; exec "$@"'
    argv = ["docker", "exec", "--env-file", str(env_file), "-u", rexec.user, "-w", rexec.workdir]
    argv += ["-i"] if rexec.stdin is not None else []
    argv += [container, "sh", "-c", wrapper, "sh", *rexec.argv]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if rexec.stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    if rexec.stdin is not None and proc.stdin is not None:
        proc.stdin.write(rexec.stdin)
        proc.stdin.close()
    lines: list[str] = []
    stderr: list[bytes] = []
    assert proc.stdout is not None and proc.stderr is not None
    err_thread = threading.Thread(target=_read_all, args=(proc.stderr, stderr))
    out_thread = threading.Thread(target=_read_lines, args=(proc.stdout, lines))
    err_thread.start()
    out_thread.start()
    cancelled = False
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        if cancel_when is not None and not cancelled and cancel_when(list(lines)):
            kill = 'kill -INT "$(cat /tmp/cage-turn.pid)"'
            subprocess.run(["docker", "exec", container, "sh", "-c", kill], check=False)
            cancelled = True
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    out_thread.join()
    err_thread.join()
    return _Result(lines, proc.wait(), b"".join(stderr).decode("utf-8", errors="replace"), cancelled)


def record(scenario: Scenario, image: str, server: FakeModelServer, out_dir: Path) -> None:
    adapter = OpencodeAdapter()
    url = server.url_for_containers
    with tempfile.TemporaryDirectory(prefix="cage-golden-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        os.chown(workspace, SANDBOX_UID, SANDBOX_UID)
        container = f"cage-golden-opencode-{scenario.name}-{os.getpid()}"
        subprocess.run(
            ["docker", "run", "-d", "--rm", "--init", "--name", container, "--label", "cage.test-run=golden",
             "--add-host", "host.docker.internal:host-gateway", "-u", "sandbox",
             "-v", f"{workspace}:/workspace", image, "sleep", "infinity"],
            check=True,
            capture_output=True,
        )  # fmt: skip
        try:
            resume: dict[str, str] = {}
            models = [*scenario.warmup, scenario.model]
            for index, model in enumerate(models):
                turn = _turn(scenario, model, url, resume, index)
                rexec = adapter.build_exec(turn)
                _write_files(workspace, rexec)
                last = index == len(models) - 1
                result = _exec(container, rexec, Path(tmp) / "env", scenario.cancel_when if last else None)
                meta = {
                    "drive": scenario.drive,
                    "exit_code": result.exit_code,
                    "stderr_tail": redact(result.stderr.strip()[-1500:]),
                    "cancelled": result.cancelled,
                    "resume": dict(turn.resume),
                }
                replayed = replay_lines(result.lines, meta)
                resume = replayed.resume_state
                if not last:
                    continue
                text = "".join(line + "\n" for line in result.lines)
                if GOLDEN_KEY in text or GOLDEN_KEY in result.stderr:
                    raise SystemExit(f"{scenario.name}: the key leaked into the CLI's output")
                (out_dir / f"{scenario.name}.in.jsonl").write_text(text, encoding="utf-8")
                (out_dir / f"{scenario.name}.meta.json").write_text(json.dumps(meta, indent=2) + "\n")
                (out_dir / f"{scenario.name}.out.jsonl").write_text(dump(replayed.events), encoding="utf-8")
                print(
                    f"{scenario.name}: rc={result.exit_code} lines={len(result.lines)} {replayed.outcome.status}"
                )
        finally:
            subprocess.run(["docker", "rm", "-f", container], check=False, capture_output=True)
            # files the CLI created belong to the sandbox user; let the temp dir go away
            shutil.rmtree(workspace, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.golden.opencode.record", description=__doc__)
    parser.add_argument("names", nargs="*", help="scenarios to record (default: all)")
    parser.add_argument("--replay", action="store_true", help="only rewrite .out.jsonl from recorded inputs")
    parser.add_argument("--build", action="store_true", help="get the image from the image builder")
    args = parser.parse_args(argv)
    out_dir = HERE / VERSION
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.replay:
        for path in regenerate(out_dir):
            print(path.name)
        return
    image = _image(args.build)
    chosen = [s for s in SCENARIOS if not args.names or s.name in args.names]
    with FakeModelServer("hello") as server:
        server.add_scenario("fast500", [{"text": "unreachable", "fail_status": 500, "retry_after_ms": 0}])
        for scenario in chosen:
            record(scenario, image, server, out_dir)


if __name__ == "__main__":
    main()
