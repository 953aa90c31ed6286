"""`KubernetesBackend.ping` (what `/readyz` reports) without a cluster: no credentials, no answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import EngineUnavailable
from orchestrator.sandbox.kubernetes.backend import KubernetesBackend, startup_check
from orchestrator.settings import Settings

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: secret-token-value}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: cage}}]
current-context: x
"""


async def test_missing_credentials_are_not_ready_with_the_reason(tmp_path: Path) -> None:
    backend = KubernetesBackend(Settings(data_dir=tmp_path, k8s_kubeconfig=tmp_path / "absent.yaml"))
    with pytest.raises(EngineUnavailable, match="no Kubernetes credentials"):
        await backend.ping()


async def test_an_unreachable_api_server_is_not_ready_and_the_token_stays_out(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    backend = KubernetesBackend(Settings(data_dir=tmp_path, k8s_kubeconfig=config))
    try:
        with pytest.raises(EngineUnavailable, match=r"API server https://127.0.0.1:1 unreachable") as caught:
            await backend.ping()
        assert "secret-token-value" not in str(caught.value)
    finally:
        await backend.aclose()


def test_the_serve_start_check_names_the_reason(tmp_path: Path) -> None:
    problem = startup_check(Settings(data_dir=tmp_path, k8s_kubeconfig=tmp_path / "absent.yaml"))
    assert problem is not None and "no Kubernetes credentials" in problem


async def test_in_cluster_without_the_pod_ip_is_not_ready_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    backend = KubernetesBackend(Settings(data_dir=tmp_path, k8s_pod_ip=""))
    with pytest.raises(EngineUnavailable, match=r"CAGE_K8S_POD_IP is not set.*status\.podIP"):
        await backend.ping()


async def test_a_pod_ip_that_is_no_address_is_refused(tmp_path: Path) -> None:
    backend = KubernetesBackend(Settings(data_dir=tmp_path, k8s_pod_ip="cage-0"))
    with pytest.raises(EngineUnavailable, match="CAGE_K8S_POD_IP is not an IP address: 'cage-0'"):
        await backend.ping()
