"""The egress image as a Kubernetes proxy pod runs it (read-only root, the `proxy` uid, no
capabilities, `emptyDir`s as tmpfs), configured by the scripts the Kubernetes backend runs over
pods/exec: not ready on the placeholder, ready once written, an unchanged text left alone, a text
squid refuses never installed. A client is told apart by its address (here the pod's loopback)."""

from __future__ import annotations

import shlex
import time
from collections.abc import AsyncIterator

import docker
import pytest
from docker.models.containers import Container

from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.images import EGRESS_IMAGE
from orchestrator.sandbox.kubernetes.egress import (
    CONF,
    READY_SCRIPT,
    START_SCRIPT,
    WRITE_SCRIPT,
    SandboxPod,
    render_pods,
)
from orchestrator.sandbox.kubernetes.proxy import PROXY_UID
from tests.integration.images.conftest import RUN_IN_LABELS

pytestmark = pytest.mark.docker
ORIGIN = "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello"
"""What the origin server beside squid answers every request with."""


@pytest.fixture
async def proxy_pod(
    builder: DockerImageBuilder, image_docker: docker.DockerClient
) -> AsyncIterator[Container]:
    tag = (await builder.ensure_image(EGRESS_IMAGE)).tag
    container = image_docker.containers.run(
        tag,
        ["sh", "-c", START_SCRIPT],
        user=f"{PROXY_UID}:{PROXY_UID}",
        read_only=True,
        tmpfs={  # a pod's emptyDir is writable by the pod's user (0777 there, owned by it here)
            path: f"uid={PROXY_UID},gid={PROXY_UID},size=16m" for path in ("/run/squid", "/var/spool/squid")
        },
        cap_drop=["ALL"],
        security_opt=["no-new-privileges:true"],
        labels=RUN_IN_LABELS,
        detach=True,
    )
    try:
        yield container
    finally:
        container.remove(force=True)


def sh(container: Container, script: str) -> tuple[int, str]:
    code, out = container.exec_run(["sh", "-c", script], demux=False)
    return code, (out or b"").decode(errors="replace")


def write(container: Container, text: str) -> tuple[int, str]:
    return sh(container, f"printf %s {shlex.quote(text)} | sh -c {shlex.quote(WRITE_SCRIPT)}")


def status_of(container: Container, url: str) -> str:
    """The status line the proxy answers a GET of `url` with, asked from the pod's loopback (given
    up to 15 s: on a loaded CI machine an answer once took more than 5)."""
    request = f"GET {url} HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n"
    code, out = sh(container, f"printf '{request}' | socat -t 15 - TCP:127.0.0.1:3128,shut-none 2>/dev/null")
    assert code == 0, out
    return out.splitlines()[0].strip() if out else ""


def wait_for(container: Container, script: str, what: str) -> None:
    deadline = time.monotonic() + 60
    while sh(container, script)[0] != 0:
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: {container.logs()[-2000:].decode(errors='replace')}")
        time.sleep(0.2)


async def test_the_proxy_pod_is_configured_over_exec(proxy_pod: Container) -> None:
    wait_for(proxy_pod, "[ -s /run/squid/squid.pid ]", "squid did not start on a read-only root")
    assert sh(proxy_pod, READY_SCRIPT)[0] != 0  # the placeholder refuses everything: not ready
    assert sh(proxy_pod, "touch /etc/squid/x")[0] != 0  # the root is read-only
    ip = sh(proxy_pod, "hostname -i")[1].split()[0]
    sh(proxy_pod, f"printf %s {shlex.quote(ORIGIN)} > /run/squid/origin.http")
    sh(
        proxy_pod,
        "nohup socat TCP-LISTEN:8080,fork,reuseaddr 'SYSTEM:cat /run/squid/origin.http' >/dev/null 2>&1 &",
    )
    allowed = f"http://{ip}:8080/"
    assert " 403 " in status_of(proxy_pod, allowed) + " "

    text = render_pods([SandboxPod("box-1", ("127.0.0.1",), f"allow:{ip}:8080")])
    assert write(proxy_pod, text) == (0, "reconfigured\n")
    assert sh(proxy_pod, READY_SCRIPT)[0] == 0
    wait_for(
        proxy_pod,
        f"printf 'GET {allowed} HTTP/1.0\\r\\n\\r\\n' | socat -t 5 - TCP:127.0.0.1:3128,shut-none | grep -q '^hello'",
        "the allowlisted origin",
    )
    assert status_of(proxy_pod, allowed).endswith("200 OK")
    assert " 403 " in status_of(proxy_pod, f"http://{ip}:8081/") + " "  # another port of it: refused

    assert write(proxy_pod, text) == (0, "unchanged\n")
    code, out = write(proxy_pod, text.replace("http_access deny all", "http_access deny no_such_acl"))
    assert code == 5 and "no_such_acl" in out
    assert sh(proxy_pod, f"cat {CONF}")[1] == text  # the refused text was never installed
    assert status_of(proxy_pod, allowed).endswith("200 OK")
