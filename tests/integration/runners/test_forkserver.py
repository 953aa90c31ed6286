"""`cage run` started by a real fork server (`cage forkserver start`): the same run as in a process
of its own, its signals and exit codes passed through, and the server serving no one else."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest

from orchestrator.stream import validate_stream
from tests.integration.runners.conftest import CAGE, SYSTEM_PYTHON, App, cage_run
from tests.waiting import until

pytestmark = pytest.mark.slow


@dataclass
class Server:
    env: dict[str, str]
    sockets: Path

    def status(self) -> dict[str, Any] | None:
        done = subprocess.run(
            [*CAGE, "forkserver", "status", "--json"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        found: dict[str, Any] | None = json.loads(done.stdout)
        assert (done.returncode == 0) == (found is not None), done.stderr
        return found

    def log(self) -> str:
        return "".join(p.read_text() for p in self.sockets.glob("*.log"))


@pytest.fixture
def server(app: App) -> Iterator[Server]:
    sockets = Path(tempfile.mkdtemp(prefix="cfs"))  # mode 0700, and short: a socket path has 107 bytes
    env = {**app.env(), "CAGE_FORKSERVER": "on", "CAGE_FORKSERVER_DIR": str(sockets)}
    started = subprocess.run(
        [*CAGE, "forkserver", "start", "--idle", "10m"], env=env, capture_output=True, text=True, timeout=180
    )
    assert started.returncode == 0, started.stderr
    rig = Server(env, sockets)
    status = rig.status()
    assert status is not None
    try:
        yield rig
    finally:
        subprocess.run([*CAGE, "forkserver", "stop"], env=env, capture_output=True, timeout=60)
        _eventually(lambda: not Path(f"/proc/{status['pid']}").exists(), within=60, what="the server exits")
        shutil.rmtree(sockets)


def _eventually(condition: Callable[[], bool], *, within: float, what: str) -> None:
    anyio.run(functools.partial(until, condition, within=within, what=what))


def _leftovers(client: docker.DockerClient, app: App) -> list[str]:
    labels = [f"{k}={v}" for k, v in app.labels.items()]
    return [c.name for c in client.containers.list(all=True, filters={"label": labels})]


def test_a_run_started_by_the_fork_server_is_the_run_itself(
    app: App, workspace: Path, server: Server, tmp_path: Path
) -> None:
    (workspace / "notes.txt").write_text("an old line\n")
    os.chown(workspace / "notes.txt", 1000, 1000)
    out = tmp_path / "out"
    assistant = app.assistant("claude", scenario="edit")
    result = cage_run(app, assistant, workspace, "fix it", extra=["--output-dir", str(out)], env=server.env)
    assert result.code == 0, result.stderr[-2000:]
    status = server.status()
    assert status is not None and status["runs"] == 1 and status["running"] == 0
    assert "forkserver.run_ended" in server.log()
    # what the child wrote went to this process's own stdout and stderr, and to its --output-dir
    assert validate_stream(result.events) == []
    assert result.end["status"] == "completed"
    assert "sandbox ready" in result.stderr
    assert [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()] == result.events
    assert json.loads((out / "summary.json").read_text())["files_changed"] == ["added.txt", "notes.txt"]
    assert (workspace / "notes.txt").read_text() == "an new line\n"
    # relative paths are the client's: the child works in the client's directory
    again = cage_run(app, assistant, Path("ws"), "fix it", env=server.env, cwd=workspace.parent)
    assert again.code == 0, again.stderr[-2000:]
    assert server.status()["runs"] == 2  # type: ignore[index]


def test_two_runs_at_once_are_two_children(app: App, tmp_path: Path, server: Server) -> None:
    """Each run is a child of its own: two at once, each with its own checkout, output and exit."""
    workspaces = [tmp_path / "one", tmp_path / "two"]
    for ws in workspaces:
        ws.mkdir()
        os.chown(ws, 1000, 1000)
    assistant = app.assistant("claude")
    argv = [*CAGE, "run", assistant, "--prompt", "hi", "--output", "jsonl", "--workspace"]
    clients = [
        subprocess.Popen(
            [*argv, str(ws)], env=server.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for ws in workspaces
    ]
    results = [client.communicate(timeout=180) for client in clients]
    assert [client.returncode for client in clients] == [0, 0], [err[-1000:] for _, err in results]
    sessions = set()
    for out, _ in results:
        events = [json.loads(line) for line in out.splitlines()]
        assert validate_stream(events) == []
        sessions |= {e["session_id"] for e in events}
    assert len(sessions) == 2
    assert server.status()["runs"] == 2  # type: ignore[index]


def test_an_idle_server_exits_by_itself_and_takes_its_socket(app: App, tmp_path: Path) -> None:
    sockets = Path(tempfile.mkdtemp(prefix="cfs"))
    env = {**app.env(), "CAGE_FORKSERVER": "on", "CAGE_FORKSERVER_DIR": str(sockets)}
    try:
        started = subprocess.run(
            [*CAGE, "forkserver", "start", "--idle", "2s"], env=env, capture_output=True, text=True
        )
        assert started.returncode == 0, started.stderr
        pid = int(started.stdout.split("pid ")[1].split(",")[0])
        _eventually(lambda: not Path(f"/proc/{pid}").exists(), within=60, what="the idle server exits")
        assert list(sockets.glob("*.sock")) == []
        assert '"forkserver.exit"' in "".join(p.read_text() for p in sockets.glob("*.log"))
    finally:
        shutil.rmtree(sockets)


def test_bad_options_and_an_open_directory_are_refused_by_name(app: App, tmp_path: Path) -> None:
    env = {**app.env(), "CAGE_FORKSERVER": "on"}
    idle = subprocess.run(
        [*CAGE, "forkserver", "start", "--idle", "soon"], env=env, capture_output=True, text=True
    )
    assert idle.returncode == 2 and "--idle" in idle.stderr and "Traceback" not in idle.stderr
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    opened = subprocess.run(
        [*CAGE, "forkserver", "start"],
        env={**env, "CAGE_FORKSERVER_DIR": str(shared)},
        capture_output=True,
        text=True,
    )
    assert opened.returncode == 2 and f"{shared}: the fork server's directory" in opened.stderr
    assert list(shared.iterdir()) == []  # nothing started, nothing written there


def test_usage_errors_and_their_exit_codes_come_through(app: App, workspace: Path, server: Server) -> None:
    result = cage_run(app, "e2e.nope", workspace, "hi", env=server.env)
    assert result.code == 2
    assert "no assistant 'e2e.nope'" in result.stderr
    status = server.status()
    assert status is not None and status["runs"] == 1


def test_sigint_reaches_the_run_which_exits_130_and_leaves_no_container(
    app: App, workspace: Path, server: Server, docker_engine: docker.DockerClient
) -> None:
    assistant = app.assistant("claude", scenario="cancel-me")
    result = cage_run(
        app, assistant, workspace, "sleep", interrupt_after='"status":"running"', env=server.env
    )
    assert result.code == 130, result.stderr[-2000:]
    assert result.end["status"] == "cancelled"
    assert _leftovers(docker_engine, app) == []


def test_a_client_killed_ends_its_run_and_its_box(
    app: App, workspace: Path, server: Server, docker_engine: docker.DockerClient
) -> None:
    assistant = app.assistant("claude", scenario="cancel-me")
    argv = [*CAGE, "run", assistant, "--workspace", str(workspace), "--prompt", "sleep", "--output", "jsonl"]
    client = subprocess.Popen(
        argv, env=server.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert client.stdout is not None
    for line in client.stdout:
        if '"status":"running"' in line:
            break
    assert _leftovers(docker_engine, app), "the run's box should be there while it runs"
    client.kill()  # no signal can be forwarded: the run learns it from the connection's end
    client.wait(timeout=30)
    client.stdout.close()
    _eventually(lambda: server.status()["running"] == 0, within=90, what="the run ends")  # type: ignore[index]
    assert _leftovers(docker_engine, app) == []


def test_after_stop_a_run_starts_in_its_own_process(app: App, workspace: Path, server: Server) -> None:
    status = server.status()
    assert status is not None
    stopped = subprocess.run([*CAGE, "forkserver", "stop"], env=server.env, capture_output=True, text=True)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not Path(f"/proc/{status['pid']}").exists()
    assert list(server.sockets.glob("*.sock")) == []
    result = cage_run(app, app.assistant("claude"), workspace, "hi", env=server.env)
    assert result.code == 0, result.stderr[-2000:]
    assert server.status() is None


_INTRUDER = """
import array, json, socket, struct, sys
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(sys.argv[1])
body = json.dumps({"op": "run", "argv": ["--version"], "env": {}, "umask": 18}).encode()
try:
    conn.sendmsg([struct.pack("!I", len(body)) + body],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2, 0]))])
    print(json.dumps(conn.recv(4096).decode()))
except (BrokenPipeError, ConnectionResetError):  # closed before the request was read
    print(json.dumps(""))
"""


def test_another_user_is_refused_even_when_the_socket_is_open_to_them(server: Server) -> None:
    """The directory keeps other users out; when it is opened (a mistake), the server still serves
    no one but its own uid, and a client does not talk to a server in a directory others may enter."""
    (sock,) = server.sockets.glob("*.sock")
    server.sockets.chmod(0o755)
    sock.chmod(0o777)
    try:
        intruder = subprocess.run(
            ["runuser", "-u", "nobody", "--", SYSTEM_PYTHON, "-c", _INTRUDER, str(sock)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert intruder.returncode == 0, intruder.stderr
        assert json.loads(intruder.stdout) == ""  # closed, nothing run, nothing said
        assert "forkserver.refused" in server.log() and "uid 65534" in server.log()
        # this user's own client will not use a directory others may enter
        assert server.status() is None
    finally:
        server.sockets.chmod(0o700)
    status = server.status()
    assert status is not None and status["runs"] == 0


def test_a_request_that_is_not_a_run_runs_nothing(server: Server) -> None:
    (sock,) = server.sockets.glob("*.sock")
    probe = subprocess.run(
        [
            SYSTEM_PYTHON,
            "-c",
            _INTRUDER.replace('"argv": ["--version"]', '"argv": "--version"'),
            str(sock),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
    assert "argv" in json.loads(json.loads(probe.stdout))["error"]
    assert server.status()["runs"] == 0  # type: ignore[index]
