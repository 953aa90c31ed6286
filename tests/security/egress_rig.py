"""Shared rig for the network security tests: a host HTTP server, an egress proxy of this test run,
a manager on the real engine, and a probe that runs inside a box and reports what it reached.

The host server answers on all interfaces; the proxy (and only the proxy) resolves
`allowed.cage.test` and `denied.cage.test` to the engine's host, so a box can reach the server
only through a policy that names it. Everything carries this session's test-run label.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.docker.netns import box_address
from orchestrator.sandbox.docker.proxy import BOX, EGRESS_LABEL
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest
from orchestrator.settings import Settings
from tests.integration.conftest import TEST_RUN_ID, TEST_RUN_LABEL, docker_engine

ALLOWED = "allowed.cage.test"
DENIED = "denied.cage.test"
PROBE = r"""
import json, os, socket, sys, time, urllib.request
out = {}
def http(label, url, proxy=True):
    handler = urllib.request.ProxyHandler({"http": "http://cage-egress:3128"} if proxy else {})
    try:
        with urllib.request.build_opener(handler).open(url, timeout=5) as r:
            out[label] = [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        out[label] = [e.code, ""]
    except Exception as e:
        out[label] = ["error", type(e).__name__]
def tcp(label, host, port):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, port)); out[label] = "connected"
    except Exception as e:
        out[label] = type(e).__name__
    finally:
        s.close()
def dns_query(label, server):
    # a raw DNS query for pypi.org to an outside resolver: it must never be answered
    q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x04pypi\x03org\x00\x00\x01\x00\x01"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
    try:
        s.sendto(q, (server, 53)); s.recvfrom(512); out[label] = "answered"
    except Exception as e:
        out[label] = type(e).__name__
def raw(label, host, port, data):
    # `data` as it stands, on a connection of its own: the first line of the answer
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(data.encode()); out[label] = s.recv(200).decode(errors="replace").split("\r\n")[0]
    except Exception as e:
        out[label] = type(e).__name__
def hammer(label, stop, seconds):
    # a new connection to the proxy every 10 ms until the file `stop` exists (at most `seconds`):
    # how each attempt ended
    counts = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end and not os.path.exists(stop):
        try:
            with socket.create_connection(("cage-egress", 3128), timeout=5) as s:
                s.sendall(b"GET http://169.254.169.254/ HTTP/1.0\r\n\r\n")
                key = "answered" if s.recv(12).startswith(b"HTTP/") else "closed"
        except Exception as e:
            key = type(e).__name__
        counts[key] = counts.get(key, 0) + 1
        time.sleep(0.01)
    out[label] = counts
def interfaces(label):
    out[label] = sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:])
def abstract(label, name):
    # an abstract Unix socket: the proxy's front has its own under this name, in its namespace
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(("\0" + name).encode().ljust(108, b"\0")); out[label] = "connected"
    except Exception as e:
        out[label] = type(e).__name__
    finally:
        s.close()
def resolve(label, name):
    try:
        out[label] = socket.gethostbyname(name)
    except Exception as e:
        out[label] = type(e).__name__
for step in json.loads(sys.argv[1]):
    globals()[step[0]](*step[1:])
print(json.dumps(out))
"""


class HostServer:
    """An HTTP server on every host interface that records the paths it served."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        rig = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                rig.paths.append(self.path)
                body = f"hello {self.path}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)  # all interfaces: the point
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HostServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def host_server() -> Iterator[HostServer]:
    with HostServer() as server:
        yield server


@pytest.fixture(scope="module")
def proxy_name(docker_engine: docker.DockerClient) -> Iterator[str]:
    """This module's own egress proxy container (with the test host names); removed at the end."""
    name = f"cage-egress-test-{uuid.uuid4().hex[:8]}"
    yield name
    with contextlib.suppress(docker.errors.NotFound):
        docker_engine.containers.get(name).remove(force=True)


MODES = ("namespace", "network")
"""How an isolated box reaches the proxy: with no interface, served from inside its namespace
(`namespace_egress`, what this root test process gets by default), or on a network of its own."""


@pytest.fixture(params=MODES)
def egress_settings(request: pytest.FixtureRequest, tmp_path: Path, proxy_name: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "cage",
        isolated_networks=True,
        namespace_egress=request.param == "namespace",
        egress_container=proxy_name,
        egress_hosts={ALLOWED: "host-gateway", DENIED: "host-gateway"},
    )


@pytest.fixture
async def egress_manager(
    docker_engine: docker.DockerClient, egress_settings: Settings
) -> AsyncIterator[SandboxManager]:
    """A manager on the real engine with the real image builder; removes this test's boxes after."""
    async with manager_on(egress_settings) as manager:
        yield manager


@contextlib.asynccontextmanager
async def manager_on(settings: Settings) -> AsyncIterator[SandboxManager]:
    """A manager of `settings` on the real engine, labelling its boxes with a label of its own, and
    removing them at the end."""
    labels = {TEST_RUN_LABEL: TEST_RUN_ID, "cage.test-case": uuid.uuid4().hex[:12]}
    backend = DockerBackend(settings)
    yield SandboxManager(backend, DockerImageBuilder(settings), settings, extra_labels=labels)
    for ref in await backend.find(labels):
        await backend.remove(ref, force=True)


def spec(network: Any, *, runner: str = "yaocode") -> SandboxSpec:
    return SandboxSpec.model_validate(
        {
            "version": "2.0",
            "runner": {"name": runner},
            "computer": {"network": network},
            "lifecycle": "oneshot",
        }
    )


async def acquire(
    manager: SandboxManager, tmp_path: Path, network: Any, *, gateway_port: int | None = None
) -> SandboxLease:
    request = SandboxRequest(
        owner="sec",
        assistant_id=f"tests.net-{uuid.uuid4().hex[:6]}",
        assistant_dir=tmp_path,
        spec=spec(network),
        gateway_port=gateway_port,
    )
    return await manager.acquire(request)


async def probe(manager: SandboxManager, lease: SandboxLease, *steps: list[Any]) -> dict[str, Any]:
    """Run the probe's `steps` inside the box; what each one reached."""
    argv = ("python3", "-c", PROBE, json.dumps(steps))
    async with await manager.exec(lease, ExecSpec(argv=argv)) as handle:
        lines = [item for item in [i async for i in handle] if isinstance(item, bytes)]
        code = await handle.wait()
    assert code == 0, (code, handle.stderr, lines)
    result: dict[str, Any] = json.loads(lines[-1])
    return result


FIXTURES = (docker_engine, host_server, proxy_name, egress_settings, egress_manager)
"""Import these into a test module (fixtures defined outside a conftest)."""


def container_ip(engine: docker.DockerClient, name: str) -> str:
    """The address the proxy knows box `name` by: its address on its network, or for a box with no
    interface the one its way out names it by (`box_address`)."""
    data = engine.api.inspect_container(name)
    if (data["Config"].get("Labels") or {}).get(EGRESS_LABEL) == BOX:
        assert data["HostConfig"]["NetworkMode"] == "none"
        return str(box_address(data["Id"]))
    (only,) = data["NetworkSettings"]["Networks"].values()
    return str(only["IPAddress"])


def url_host(ip: str) -> str:
    """`ip` as a URL's host (an IPv6 address in brackets)."""
    return f"[{ip}]" if ":" in ip else ip


def served_without_interface(engine: docker.DockerClient, name: str) -> bool:
    """Whether box `name` has no network interface (its way out served from its namespace)."""
    return (engine.api.inspect_container(name)["Config"].get("Labels") or {}).get(EGRESS_LABEL) == BOX
