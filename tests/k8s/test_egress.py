"""Egress on a real cluster: a `bridge` sandbox reaches a public host through the egress proxy
pods, an allowlist sandbox reaches its entry and is refused another (squid's 403, and a denial
from the proxy pod's log), both told apart by their pod IPs in the configuration the backend
wrote into the proxies."""

from __future__ import annotations

import os

import anyio
import pytest

from orchestrator.dsl.sandbox import NetworkAllowlist
from orchestrator.sandbox.backend import ExecSpec, SandboxRef
from orchestrator.sandbox.kubernetes.backend import KubernetesBackend
from orchestrator.sandbox.network import EgressPolicy, egress_policy
from tests.k8s.conftest import sandbox

HOST = os.environ.get("CAGE_K8S_EGRESS_HOST", "example.com")
OTHER = os.environ.get("CAGE_K8S_EGRESS_OTHER_HOST", "example.org")
ASK = (
    "exec 3<>/dev/tcp/cage-egress/3128 || exit 9; "
    'printf "HEAD http://%s/ HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n" "$1" "$1" >&3; '
    "head -n 1 <&3"
)
"""bash: one request through the proxy by hand (the test image has no HTTP client); its status line."""


async def status(backend: KubernetesBackend, box: SandboxRef, host: str) -> str:
    async with await backend.exec(box, ExecSpec(argv=("bash", "-c", ASK, "ask", host))) as handle:
        lines = [item for item in [line async for line in handle] if isinstance(item, bytes)]
        assert await handle.wait() == 0, handle.stderr
    return lines[0].decode().strip() if lines else ""


@pytest.mark.usefixtures("egress_proxy")
async def test_bridge_reaches_a_host_and_an_allowlist_refuses_another(
    backend: KubernetesBackend, run_labels: dict[str, str]
) -> None:
    async with sandbox(backend, run_labels, EgressPolicy(mode="bridge")) as box:
        answer = await status(backend, box, HOST)
        assert answer.split()[1][0] in "23", answer
    allow = egress_policy(NetworkAllowlist(allow=[HOST]))
    async with sandbox(backend, run_labels, allow) as box:
        assert (await status(backend, box, HOST)).split()[1][0] in "23"
        with backend.egress.denials.subscribe(box.name) as denials:
            assert (await status(backend, box, OTHER)).split()[1] == "403"
            with anyio.fail_after(60):  # the proxy pod's log, followed
                denial = await denials.receive()
        assert (denial.sandbox, denial.host) == (box.name, OTHER)
    assert await backend.egress.refresh() >= 1  # both pods went: a render without them is written
