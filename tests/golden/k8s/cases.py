"""The specs whose Kubernetes objects are kept as golden JSON files beside this module."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.dsl.sandbox import NetworkAllowlist
from orchestrator.sandbox.backend import CreateSpec, PortBinding, ResourceLimits, VolumeMount
from orchestrator.sandbox.kubernetes.egress import SandboxPod, render_pods
from orchestrator.sandbox.kubernetes.manifests import (
    KubeTarget,
    isolated_pod,
    network_policy_manifest,
    pod_manifest,
    pvc_manifest,
    services_manifests,
)
from orchestrator.sandbox.kubernetes.proxy import proxy_deployment, proxy_network_policy
from orchestrator.sandbox.network import EgressPolicy, egress_policy, proxy_env

HERE = Path(__file__).parent
EGRESS_IMAGE = "registry.example:5000/cage/cage/egress:16c739ef412e"
TARGET = KubeTarget(
    namespace="cage",
    registry="registry.example:5000/cage",
    runtime_class="gvisor",
    storage_class="fast",
    image_pull_secret="cage-pull",
    egress_selector={"app.kubernetes.io/name": "cage", "app.kubernetes.io/component": "egress"},
    gateway_selector={"app.kubernetes.io/name": "cage", "app.kubernetes.io/component": "orchestrator"},
    gateway_port=8089,
)
LABELS = {
    "cage.managed": "true",
    "cage.sandbox": "cage-claude-3f2a9c0d1e2f3a4b5c6d7e8f",
    "cage.owner": "alice@example.com",
    "cage.config-hash": "0" * 64,
    "cage.idle-timeout": "3600",
    "cage.max-lifetime": "",
}
HARDENED = CreateSpec(
    image="cage/runner-claude:3f2a9c0d",
    name="cage-claude-3f2a9c0d1e2f3a4b5c6d7e8f",
    command=("sleep", "infinity"),
    labels=LABELS,
    env={"ANTHROPIC_BASE_URL": "http://cage-gateway:8089", **proxy_env()},
    user="sandbox",
    workdir="/workspace",
    mounts=(VolumeMount(source="cage-ws-alice-0123", target="/workspace", owner=(1000, 1000)),),
    limits=ResourceLimits(memory_bytes=2 * 2**30, nano_cpus=1_500_000_000, pids=256, disk_bytes=5 * 2**30),
    cap_drop=("ALL",),
    read_only=True,
    tmpfs={"/tmp": "rw,nosuid,size=256m", "/home/sandbox/.cache": "rw,size=64m"},
    ports=(PortBinding(container_port=6080),),
    stop_timeout=5,
    egress=EgressPolicy(mode="none"),
)
ALLOWLIST = HARDENED.model_copy(
    update={
        "name": "Cage_Codex.Box",
        "read_only": False,
        "tmpfs": {},
        "ports": (),
        "egress": egress_policy(NetworkAllowlist(allow=["api.github.com", "*.pypi.org"])),
    }
)


def cases() -> dict[str, Any]:
    """File name -> the object the current code produces."""
    assert HARDENED.egress is not None and ALLOWLIST.egress is not None
    gateway, proxy = services_manifests(TARGET)
    return {
        "pod-hardened.json": isolated_pod(pod_manifest(HARDENED, TARGET), HARDENED.egress),
        "pod-allowlist.json": isolated_pod(pod_manifest(ALLOWLIST, TARGET), ALLOWLIST.egress),
        "pvc-workspace.json": pvc_manifest("cage-ws-alice-0123", LABELS, TARGET),
        "networkpolicy-none.json": network_policy_manifest(HARDENED, HARDENED.egress, TARGET),
        "networkpolicy-allowlist.json": network_policy_manifest(ALLOWLIST, ALLOWLIST.egress, TARGET),
        "service-gateway.json": gateway,
        "service-egress.json": proxy,
        "deployment-egress.json": proxy_deployment(TARGET, image=EGRESS_IMAGE),
        "networkpolicy-egress.json": proxy_network_policy(TARGET),
    }


SANDBOX_PODS = (
    SandboxPod(
        "cage-codex-1", ("10.244.1.17",), "allow:api.github.com,*.pypi.org,203.0.113.0/24,example.com:8443"
    ),
    SandboxPod("cage-claude-2", ("10.244.2.5", "fd00:10:244:2::5"), "bridge"),
    SandboxPod("cage-tai-3", ("10.244.1.30",), "none"),
    SandboxPod("cage-old-4", ("10.244.1.31",), "bridge", gone=True),
    SandboxPod("cage-pending-5", (), "bridge"),
    SandboxPod("cage-odd-6", ("10.244.3.9",), "allow:"),
)
"""Isolated sandbox pods as the proxies' configuration sees them: an allowlist, a dual-stack
bridge, a `none` (no client, but never a destination), a terminating pod and one without an IP
yet (neither in it), an unreadable policy (`none`)."""
SQUID_GOLDEN = "squid-pods.conf"


def squid_case() -> str:
    return render_pods(SANDBOX_PODS)


def render(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"
