"""The Helm chart, rendered with values.yaml (and overrides), is schema-valid and least-privilege."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.sandbox.kubernetes.backend import NEEDED
from tests.golden.k8s.chart import CHART, render
from tests.golden.k8s.schema import schema_errors

OVERRIDES = {"replicaCount": 5, "sandboxes": {"runtimeClass": "gvisor", "storageClass": "fast"}}


def by_kind(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        out.setdefault(obj["kind"], []).append(obj)
    return out


@pytest.mark.parametrize("overrides", [{}, OVERRIDES], ids=["defaults", "overrides"])
def test_every_rendered_object_is_schema_valid(overrides: dict[str, Any]) -> None:
    objects = render(overrides, namespace="team-a")
    assert len(objects) == len(list((CHART / "templates").glob("*.yaml")))
    assert [e for e in map(schema_errors, objects) if e] == []
    assert all(obj["metadata"]["namespace"] == "team-a" for obj in objects)


def test_the_deployment_has_replicas_probes_the_secret_and_hardening() -> None:
    (deployment,) = by_kind(render(OVERRIDES))["Deployment"]
    assert deployment["spec"]["replicas"] == 5
    pod = deployment["spec"]["template"]["spec"]
    (box,) = pod["containers"]
    assert box["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert box["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e for e in box["env"]}
    assert env["CAGE_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "cage-database", "key": "url"}
    assert env["CAGE_BACKEND"]["value"] == "kubernetes" and env["CAGE_K8S_RUNTIME_CLASS"]["value"] == "gvisor"
    assert box["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["serviceAccountName"] == "cage"


def test_rbac_is_namespaced_and_covers_what_the_backend_checks() -> None:
    kinds = by_kind(render())
    assert "ClusterRole" not in kinds and "ClusterRoleBinding" not in kinds
    (role,) = kinds["Role"]
    granted = {
        (verb, resource) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]
    }
    for verb, resource, sub in NEEDED:
        assert (verb, f"{resource}/{sub}" if sub else resource) in granted
    assert not any("*" in rule["verbs"] or "*" in rule["resources"] for rule in role["rules"])
    assert not any("secrets" in rule["resources"] for rule in role["rules"])


def test_only_plain_substitutions_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "values.yaml").write_text("a: {b: 1}\n")
    (tmp_path / "templates" / "x.yaml").write_text("kind: X\nv: {{ if .Values.a }}y{{ end }}\n")
    with pytest.raises(ValueError, match=r"x\.yaml: unsupported template action"):
        render(chart=tmp_path)
    (tmp_path / "templates" / "x.yaml").write_text("kind: X\nv: {{ .Values.a.c }}\n")
    with pytest.raises(ValueError, match=r"no value '\.a\.c'"):
        render(chart=tmp_path)


def test_each_replica_is_reached_directly_through_the_headless_gateway_service() -> None:
    kinds = by_kind(render(OVERRIDES))
    (deployment,) = kinds["Deployment"]
    (box,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in box["env"]}
    assert env["CAGE_K8S_POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    (gateway,) = [s for s in kinds["Service"] if s["metadata"]["name"] == "cage-gateway"]
    spec = gateway["spec"]
    assert spec["clusterIP"] == "None" and spec["publishNotReadyAddresses"] is True
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"].items() <= labels.items()
    port = int(env["CAGE_GATEWAY_PORT"]["value"])
    assert [(p["port"], p["targetPort"]) for p in spec["ports"]] == [(port, port)]
    assert {"name": "gateway", "containerPort": port, "protocol": "TCP"} in box["ports"]
