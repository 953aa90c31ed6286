"""`ConfigLock` over a real socket pair: what it reads of the proxy's shell, and when it skips.

The shell's side is framed as the engine frames an exec's output (8-byte headers); the engine's
own exec is in `tests/security/test_network_proxy_lock.py`.
"""

from __future__ import annotations

import hashlib
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from orchestrator.errors import SandboxError
from orchestrator.sandbox.docker import proxylock
from orchestrator.sandbox.docker.frames import ExecStream
from orchestrator.sandbox.docker.proxylock import ConfigLock

TEXT = "http_port 127.0.0.1:13128 require-proxy-header\n"
DIGEST = hashlib.sha256(TEXT.encode()).hexdigest()


class _Exec:
    """What the engine says of the exec when asked (`exec_inspect`)."""

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        return {"Running": False, "ExitCode": 4}


def frame(data: bytes, stream: int = 1) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


@pytest.fixture
def pair() -> Iterator[tuple[ConfigLock, socket.socket]]:
    ours, shell = socket.socketpair()
    reader = ours.makefile("rb")
    yield ConfigLock(_Exec(), "cage-egress", "exec-1", ExecStream(ours, reader, None)), shell  # type: ignore[arg-type]
    reader.close()
    ours.close()
    shell.close()


def granted(pair: tuple[ConfigLock, socket.socket], said: bytes) -> ConfigLock:
    held, shell = pair
    shell.sendall(frame(b"warning on stderr\n", stream=2) + frame(said[:5]) + frame(said[5:]))
    held.await_grant()
    return held


def test_a_configuration_squid_took_is_not_written_again(pair: tuple[ConfigLock, socket.socket]) -> None:
    held = granted(pair, f"locked {DIGEST} {DIGEST}\n".encode())
    assert held.holds(TEXT)
    assert not held.holds(TEXT + "# one more box\n")


@pytest.mark.parametrize(
    "said",
    [
        f"locked {DIGEST} {'0' * 64}\n",  # written by a holder that died before squid took it
        f"locked {DIGEST} \n",  # never taken (a proxy started since holds no record)
        "locked  \n",  # no configuration file at all
    ],
)
def test_a_configuration_not_seen_taken_is_written(pair: tuple[ConfigLock, socket.socket], said: str) -> None:
    assert not granted(pair, said.encode()).holds(TEXT)


def test_a_write_sends_the_size_then_the_text_and_waits_for_written(
    pair: tuple[ConfigLock, socket.socket],
) -> None:
    held = granted(pair, b"locked  \n")
    _, shell = pair
    shell.sendall(frame(b"written\n"))
    held.write(TEXT)
    held.confirm()
    shell.shutdown(socket.SHUT_WR)  # the shell ends once it has read `taken`
    held.release()
    assert shell.recv(4096) == f"{len(TEXT.encode())}\n{TEXT}taken\n".encode()


def test_an_exec_that_ends_before_the_lock_is_refused_with_its_exit_code(
    pair: tuple[ConfigLock, socket.socket],
) -> None:
    held, shell = pair
    shell.sendall(frame(b"flock: timeout while waiting\n", stream=2))
    shell.close()
    with pytest.raises(SandboxError, match="exit code 4"):
        held.await_grant()


def test_a_proxy_that_says_something_else_or_too_much_is_refused(
    pair: tuple[ConfigLock, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    held, shell = pair
    shell.sendall(frame(b"granted\n"))
    with pytest.raises(SandboxError, match="something else than `locked`"):
        held.await_grant()
    monkeypatch.setattr(proxylock, "_MAX_SAID", 16)
    shell.sendall(frame(b"x" * 64))
    with pytest.raises(SandboxError, match="said too much"):
        held.await_grant()


def test_the_first_line_read_along_with_the_engines_answer_is_not_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine answers an exec's start with HTTP headers, then the stream. A lock granted at once
    says `locked` so soon that the HTTP client, reading the headers through its buffer, takes that
    frame in too: it is in the reader's buffer, never again on the socket (seen once in CI, where
    reading the socket itself waited 95 s for a line already read)."""
    monkeypatch.setattr(proxylock, "LOCK_SECONDS", -4)  # a second to find it
    ours, shell = socket.socketpair()
    reader = ours.makefile("rb")
    shell.sendall(b"HTTP/1.1 101 UPGRADED\r\n\r\n" + frame(f"locked {DIGEST} {DIGEST}\n".encode()))
    assert reader.readline() == b"HTTP/1.1 101 UPGRADED\r\n" and reader.readline() == b"\r\n"
    held = ConfigLock(_Exec(), "cage-egress", "exec-1", ExecStream(ours, reader, None))  # type: ignore[arg-type]
    held.await_grant()
    assert held.holds(TEXT)
    reader.close()
    ours.close()
    shell.close()
