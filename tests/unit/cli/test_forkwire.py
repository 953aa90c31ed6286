"""The fork server's wire and where it listens (`orchestrator/cli/forkwire.py`), and which
commands the executable hands over (`orchestrator/cli/launch.py`), on real sockets."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import forkwire
from orchestrator.cli.launch import subcommand

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "a.b", "-w", "."], "run"),
        (["--app", "run", "validate"], "validate"),
        (["--log-level", "DEBUG", "run"], "run"),
        (["--app=x", "run"], "run"),
        (["--help"], None),
        ([], None),
    ],
)
def test_the_subcommand_is_found_past_the_roots_options(argv: list[str], expected: str | None) -> None:
    assert subcommand(argv) == expected


def test_a_request_and_its_descriptors_cross_a_socket() -> None:
    left, right = socket.socketpair()
    read_end, write_end = os.pipe()
    try:
        request = {"op": "run", "argv": ["run", "x"], "env": {"K": "v" * 100_000}, "umask": 0o022}
        forkwire.send_request(left, request, (read_end, read_end, read_end, read_end))
        got, fds = forkwire.receive_request(right)
        assert got == request and len(fds) == forkwire.FDS
        os.write(write_end, b"through the passed descriptor")
        assert os.read(fds[0], 100) == b"through the passed descriptor"
        for fd in fds:
            os.close(fd)
    finally:
        for end in (left, right):
            end.close()
        os.close(read_end)
        os.close(write_end)


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (struct.pack("!I", forkwire.MAX_REQUEST + 1), "bytes (at most"),
        (struct.pack("!I", 10) + b"[]", "cut short"),
        (struct.pack("!I", 2) + b"[]", "not one JSON object"),
        (struct.pack("!I", 3) + b"{x}", "Expecting property name"),
        (b"\x00", "cut short"),
    ],
)
def test_a_malformed_request_is_refused_and_its_descriptors_closed(data: bytes, complaint: str) -> None:
    left, right = socket.socketpair()
    read_end, write_end = os.pipe()
    try:
        left.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", read_end))])
        left.shutdown(socket.SHUT_WR)
        before = {p.name for p in Path("/proc/self/fd").iterdir()}
        with pytest.raises(forkwire.WireError, match=complaint.replace("(", r"\(")):
            forkwire.receive_request(right)
        assert {p.name for p in Path("/proc/self/fd").iterdir()} <= before  # what came with it is closed
    finally:
        for end in (left, right):
            end.close()
        os.close(read_end)
        os.close(write_end)


def test_the_wrong_number_of_descriptors_is_refused() -> None:
    left, right = socket.socketpair()
    try:
        forkwire.send_request(left, {"op": "run"}, (0, 1))
        with pytest.raises(forkwire.WireError, match="2 descriptors"):
            forkwire.receive_request(right)
    finally:
        left.close()
        right.close()


def test_only_a_private_directory_of_ours_is_trusted(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert forkwire.private_dir(str(private))
    private.chmod(0o750)
    assert not forkwire.private_dir(str(private))  # a group may enter
    private.chmod(0o700)
    link = tmp_path / "link"
    link.symlink_to(private)
    assert not forkwire.private_dir(str(link))
    os.chown(private, 1000, 1000)
    assert not forkwire.private_dir(str(private))  # someone else's
    assert not forkwire.private_dir(str(tmp_path / "missing"))


def test_no_connection_to_a_directory_others_may_enter(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    path = shared / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    try:
        assert forkwire.connect(str(path)) is None
        shared.chmod(0o700)
        conn = forkwire.connect(str(path))
        assert conn is not None
        conn.close()
    finally:
        listener.close()


def test_the_socket_is_named_after_the_code_and_fits_a_unix_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(forkwire.ENV_DIR, str(tmp_path))
    path = forkwire.socket_path()
    assert path == str(tmp_path / f"{forkwire.fingerprint()}.sock")
    with pytest.raises(forkwire.WireError, match="too long"):
        forkwire.socket_path(str(tmp_path / ("d" * 120)))


def test_the_fingerprint_follows_every_source_file(tmp_path: Path) -> None:
    """An edit (size or modification time) anywhere in the sources gives another listing."""
    tree = tmp_path / "pkg"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.py").write_text("x = 1\n")
    (tree / "sub" / "b.py").write_text("y = 2\n")
    (tree / "sub" / "data.txt").write_text("not a source\n")
    first = list(forkwire._sources(str(tree)))
    assert [Path(p).name for p, _, _ in first] == ["a.py", "b.py"]
    os.utime(tree / "sub" / "b.py", ns=(1, 1))
    assert list(forkwire._sources(str(tree))) != first


def test_the_executable_imports_nothing_but_the_standard_library_before_a_run_is_handed_over() -> None:
    probe = (
        "import json, sys; from orchestrator.cli import launch, forkwire;"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    foreign = {m for m in json.loads(done.stdout) if not m.startswith(("orchestrator", "__editable__", "_"))}
    assert foreign == set()
    assert {m for m in json.loads(done.stdout) if m.startswith("orchestrator")} == {
        "orchestrator",
        "orchestrator.cli",
        "orchestrator.cli.forkwire",
        "orchestrator.cli.launch",
    }
