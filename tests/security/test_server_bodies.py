"""H9: a request body is refused before it is read. 100 MB bodies, declared or chunked, with and
without a key, against a real uvicorn serving the app; the server's memory must not grow by them."""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from orchestrator.api import ApiConfig, create_app
from tests.unit.api.conftest import echo_script, make_settings
from tests.unit.api.harness import ServerThread, create_keys, fake_services
from tests.unit.sandbox.fakes import FakeBackend

HUNDRED_MB = 100 * 2**20
CHUNK = b" " * 2**20


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ServerThread, str]]:
    settings = make_settings(tmp_path)
    keys = create_keys(settings, {"alice": ("user", "alice")})
    app = create_app(settings, services=fake_services(FakeBackend(script=echo_script)), config=ApiConfig())
    served = ServerThread(app).start()
    try:
        yield served, keys["alice"]
    finally:
        served.stop()


def rss_bytes() -> int:
    """This process's resident set (the server runs in a thread of it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _complete(response: bytes) -> bool:
    head, sep, body = response.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def send_huge(
    port: int, method: str, path: str, *, token: str | None, chunked: bool
) -> tuple[int, bytes, int]:
    """Send a 100 MB body, a MiB at a time, stopping once the server answers.
    Returns (status, response bytes, body bytes sent)."""
    head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json"]
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {HUNDRED_MB}")
    if token:
        head.append(f"Authorization: Bearer {token}")
    sent = 0
    response = b""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=30) as sock,
        selectors.DefaultSelector() as answer,
    ):
        answer.register(sock, selectors.EVENT_READ)  # poll/epoll: fine past fd 1024, unlike select()
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        deadline = time.monotonic() + 60
        while sent < HUNDRED_MB and time.monotonic() < deadline:
            if answer.select(timeout=0):
                break
            piece = (b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n") if chunked else CHUNK
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(CHUNK)
        try:
            while not _complete(response):
                data = sock.recv(65536)
                if not data:
                    break
                response += data
        except (ConnectionResetError, TimeoutError):
            pass
    status = int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else 0
    return status, response, sent


@pytest.mark.parametrize(
    ("method", "path", "with_key", "chunked", "expected"),
    [
        ("POST", "/v1/chat/completions", False, False, 413),  # declared too large: refused on the header
        ("POST", "/v1/chat/completions", False, True, 401),  # no key: refused before the body is read
        ("POST", "/v1/assistants/tests.echo/stream", True, True, 413),  # a key, streamed: counted, cut
        ("PUT", "/v1/memory/k", True, True, 413),  # a small-body route: cut at 1 MiB
        ("PUT", "/v1/memory/k", False, True, 401),
    ],
)
def test_huge_bodies_are_refused_before_they_are_read(
    server: tuple[ServerThread, str], method: str, path: str, with_key: bool, chunked: bool, expected: int
) -> None:
    served, token = server
    before = rss_bytes()
    key = token if with_key else None
    status, response, sent = send_huge(served.port, method, path, token=key, chunked=chunked)
    grown = rss_bytes() - before
    assert status == expected, response[:300]
    assert sent < 40 * 2**20, f"the server read {sent} bytes before answering"
    assert grown < 30 * 2**20, f"RSS grew by {grown} bytes"
    if expected == 413:
        assert b"BodyTooLarge" in response and b"limit for this route is" in response
    # the server still serves
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 200")


def test_failed_requests_from_one_address_are_bucketed_and_a_valid_key_still_works(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    keys = create_keys(settings, {"alice": ("user", "alice")})
    config = ApiConfig(failed_auth_burst=5, failed_auth_per_minute=1)
    served = ServerThread(create_app(settings, services=fake_services(), config=config)).start()
    try:
        with httpx.Client(base_url=served.base_url) as client:
            codes = [
                client.get("/v1/sessions", headers={"Authorization": "Bearer nope"}).status_code
                for _ in range(8)
            ]
            limited = client.get("/v1/sessions")
            valid = client.get("/v1/sessions", headers={"Authorization": f"Bearer {keys['alice']}"})
    finally:
        served.stop()
    assert codes[:5] == [401] * 5 and codes[5:] == [429] * 3
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert "too many failed requests" in limited.json()["detail"]
    assert valid.status_code == 200  # the bucket never refuses a valid key (clients behind one proxy)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/assistants/tests.echo/stream"])
def test_the_routes_that_carry_attachments_take_bodies_past_the_small_limit(
    server: tuple[ServerThread, str], path: str
) -> None:
    """2 MiB (past `max_body_bytes`, within `max_attachment_body_bytes`) reaches the two routes that
    carry attachments; the same body on a small-body route is refused."""
    served, token = server
    text = "a" * (2 * 2**20)
    body = {"messages": [{"role": "user", "content": text}]}
    if path == "/v1/chat/completions":
        body["model"] = "tests.echo"
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=served.base_url, headers=auth, timeout=60) as http:
        taken = http.post(path, json=body)
        small = http.put("/v1/memory/k", json={"value": text})
    assert taken.status_code == 200, taken.text[:300]
    assert small.status_code == 413 and "limit for this route is" in small.text
