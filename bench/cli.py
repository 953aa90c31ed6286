"""CLI start-up bench (issue 14, target 1), measured in one run.

1. **Start-up**: `cage --help` against `python -c "import typer, rich"` (the floor any typer CLI
   pays), as a ratio of medians; target ≤ 2×. `cage --version`, `cage validate` and
   `cage assistants --json` on this repository's app are listed for reference.
2. **A runner turn** (the Docker engine and the claude runner image; `--no-turn` skips it): `cage run` of a
   claude turn on an app made by `cage init` against the fake model server, against `docker run`
   of the same image, CLI, prompt and model; target ≤ 1.3×. Twice: started by a fork server
   (`cage forkserver start`, the bench's own, stopped at the end: the target's row), and in a
   process of its own (`CAGE_FORKSERVER=off`). Containers carry `cage.bench=<uuid>`
   and are removed. Beside it, the engine's floor for the isolation a Cage box has (a network of
   its own): `docker run` of the CLI plus what an internal network adds to a `docker run` of
   `true` (create it, run on it, remove it, less the plain run), measured in turn with the rest.

Usage: `.venv/bin/python bench/cli.py [--runs 7] [--no-turn]` (`make bench` runs both parts).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAGE = [sys.executable, "-m", "orchestrator.cli"]
TARGET_HELP_RATIO = 2.0
"""Issue 14, target 1: `cage --help` takes at most twice `import typer, rich`."""
TARGET_TURN_RATIO = 1.3
"""Issue 14, target 1: `cage run` of a CLI-runner turn takes at most 1.3× `docker run` of it."""
MODEL = "claude-sonnet-4-5@text"
PROMPT = "say hello"
SANDBOX_UID = 1000


def timed(argv: Sequence[str], *, runs: int, cwd: Path = ROOT, env: dict[str, str] | None = None) -> float:
    """Median wall-clock seconds of `argv` over `runs` runs (after one warm-up run)."""
    samples: list[float] = []
    for i in range(runs + 1):
        start = time.perf_counter()
        result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        elapsed = time.perf_counter() - start
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr[-500:]}")
        if i:
            samples.append(elapsed)
    return statistics.median(samples)


def bench_env() -> dict[str, str]:
    """This environment, as an installed `cage` runs: bytecode written and read (a shell that sets
    `PYTHONDONTWRITEBYTECODE` would make every run compile Cage's sources again, which an installed
    package never does), and placeholder keys for the example connectors `cage validate` loads."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {"ANTHROPIC_API_KEY": "sk-bench-fake-key", "OPENAI_API_KEY": "sk-bench-fake-key", **env}


def start_up(runs: int) -> bool:
    env = bench_env()
    baseline = timed([sys.executable, "-c", "import typer, rich"], runs=runs, env=env)
    help_s = timed([*CAGE, "--help"], runs=runs, env=env)
    ratio = help_s / baseline
    label = 'python -c "import typer, rich"'
    print(f"{label:32} {baseline * 1000:7.0f} ms  (baseline)")
    print(f"{'cage --help':32} {help_s * 1000:7.0f} ms  {ratio:4.2f}x  (target <= {TARGET_HELP_RATIO}x)")
    for args in (["--version"], ["validate"], ["assistants", "--json"]):
        seconds = timed([*CAGE, *args], runs=runs, env=env)
        print(f"{'cage ' + ' '.join(args):32} {seconds * 1000:7.0f} ms  {seconds / baseline:4.2f}x")
    return ratio <= TARGET_HELP_RATIO


def runner_turn(runs: int) -> bool:
    """`cage run` of a claude turn vs `docker run` of the claude CLI, same model server and prompt."""
    label = f"cage.bench={uuid.uuid4().hex}"
    base_env = {k: v for k, v in bench_env().items() if not k.startswith("CAGE_")}
    built = subprocess.run([*CAGE, "images", "build", "claude"], capture_output=True, text=True, env=base_env)
    if built.returncode != 0:
        raise SystemExit(f"cage images build claude failed: {built.stderr[-500:]}")
    tag = built.stdout.split()[-1]
    try:
        ours, forked, raw, isolation = _turns(tag, label, base_env, runs)
    finally:  # what the runs made (containers first: a network in use is not removed), however they ended
        _remove(["docker", "ps", "-aq", "--filter", f"label={label}"], ["docker", "rm", "-f"])
        _remove(["docker", "network", "ls", "-q", "--filter", f"label={label}"], ["docker", "network", "rm"])
    ratio = forked / raw
    print(f"{'docker run claude -p':32} {raw * 1000:7.0f} ms  (baseline)")
    name = "cage run app.coder (claude)"
    print(
        f"{name:32} {forked * 1000:7.0f} ms  {ratio:4.2f}x  (target <= {TARGET_TURN_RATIO}x)"
        "  started by the fork server"
    )
    print(f"{'  the same, a process of its own':32} {ours * 1000:7.0f} ms  {ours / raw:4.2f}x")
    floor = raw + isolation
    print(
        f"{'docker run + own network':32} {floor * 1000:7.0f} ms  (the isolation floor: +"
        f"{isolation * 1000:.0f} ms for the network)   cage run {forked / floor:4.2f}x of it"
    )
    return ratio <= TARGET_TURN_RATIO


def _remove(listing: list[str], remove: list[str]) -> None:
    """`remove` each object `listing` prints."""
    for name in subprocess.run(listing, capture_output=True, text=True).stdout.split():
        subprocess.run([*remove, name], capture_output=True)


def _turns(tag: str, label: str, base_env: dict[str, str], runs: int) -> tuple[float, float, float, float]:
    """Median seconds of `cage run` in a process of its own, of `cage run` started by a fork
    server, of `docker run` of the claude turn, and what a network of its own adds to a run; what
    they make carries `label`."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.model_server import FakeModelServer

    with tempfile.TemporaryDirectory() as tmp, FakeModelServer("text", host="0.0.0.0") as model:
        work = Path(tmp)
        subprocess.run(
            [*CAGE, "init", str(work / "app"), "--host", model.url, "--model", MODEL],
            check=True,
            capture_output=True,
            env=base_env,
        )
        (work / "ws").mkdir()
        os.chown(work / "ws", SANDBOX_UID, SANDBOX_UID)  # the agent runs as the checkout's owner
        env = {
            **base_env,
            "ANTHROPIC_API_KEY": "sk-bench-fake-key",
            "CAGE_DATA_DIR": str(work / "data"),
            "CAGE_SANDBOX_LABELS": json.dumps(dict([label.split("=", 1)])),
        }
        run = [*CAGE, "run", "app.coder", "-w", str(work / "ws"), "-p", PROMPT, "--output", "jsonl"]
        ours = timed(run, runs=runs, cwd=work / "app", env={**env, "CAGE_FORKSERVER": "off"})
        with tempfile.TemporaryDirectory(prefix="cfs") as sockets:  # short: a socket path has 107 bytes
            served = {**env, "CAGE_FORKSERVER_DIR": sockets}
            subprocess.run([*CAGE, "forkserver", "start"], check=True, capture_output=True, env=served)
            try:
                forked = timed(run, runs=runs, cwd=work / "app", env=served)
            finally:
                subprocess.run([*CAGE, "forkserver", "stop"], check=True, capture_output=True, env=served)
        docker = [
            "docker",
            "run",
            "--rm",
            "--label",
            label,
            "--add-host",
            "host.docker.internal:host-gateway",
            "-u",
            str(SANDBOX_UID),
            "-e",
            "HOME=/tmp",
            "-e",
            f"ANTHROPIC_BASE_URL={model.url_for_containers}",
            "-e",
            "ANTHROPIC_API_KEY=sk-bench-fake-key",
            "-e",
            "DISABLE_AUTOUPDATER=1",
            "-e",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
            tag,
            "claude",
            "-p",
            PROMPT,
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            MODEL,
        ]
        raw = timed(docker, runs=runs, env=base_env)
        isolation = isolation_cost(tag, label, runs=runs, env=base_env)
    return ours, forked, raw, isolation


def isolation_cost(tag: str, label: str, *, runs: int, env: dict[str, str]) -> float:
    """Median seconds an internal network of its own adds to a `docker run --rm` of `true`:
    create the network, run on it, remove the network, against the plain run (run in turn)."""

    def run_true(*network: str) -> list[str]:
        return ["docker", "run", "--rm", "--label", label, *network, "--entrypoint", "true", tag]

    extra: list[float] = []
    for i in range(runs + 1):
        network = f"cage-bench-{label.rsplit('=', 1)[-1][:12]}-{i}"
        start = time.perf_counter()
        for argv in (
            ["docker", "network", "create", "--internal", "--label", label, network],
            run_true("--network", network),
            ["docker", "network", "rm", network],
        ):
            subprocess.run(argv, capture_output=True, check=True, env=env, timeout=120)
        isolated = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run(run_true(), capture_output=True, check=True, env=env, timeout=120)
        if i:  # the first pair warms up
            extra.append(isolated - (time.perf_counter() - start))
    return max(0.0, statistics.median(extra))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="Timed runs per command (median).")
    parser.add_argument("--no-turn", action="store_true", help="Skip the claude turn (Docker).")
    args = parser.parse_args(argv)
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    ok = start_up(args.runs)
    if not args.no_turn:
        ok = runner_turn(max(3, args.runs // 2)) and ok
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
