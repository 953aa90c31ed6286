"""The Helm chart, rendered with values.yaml (and overrides), is schema-valid and least-privilege."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.sandbox.kubernetes.backend import NEEDED, target_from
from orchestrator.sandbox.kubernetes.manifests import services_manifests
from orchestrator.sandbox.kubernetes.proxy import proxy_deployment, proxy_network_policy
from orchestrator.settings import Settings
from tests.golden.k8s.chart import CHART, chart_values, render
from tests.golden.k8s.schema import schema_errors

OVERRIDES = {
    "replicaCount": 5,
    "sandboxes": {"runtimeClass": "gvisor", "storageClass": "fast", "imagePullSecret": "cage-pull"},
    "egress": {"image": "reg.example/cage/cage/egress:0123456789ab", "replicaCount": 3},
}


def by_kind(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        out.setdefault(obj["kind"], []).append(obj)
    return out


def orchestrator_deployment(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in by_kind(objects)["Deployment"] if d["metadata"]["name"] == "cage"]
    return deployment


@pytest.mark.parametrize("overrides", [{}, OVERRIDES], ids=["defaults", "overrides"])
def test_every_rendered_object_is_schema_valid(overrides: dict[str, Any]) -> None:
    objects = render(overrides, namespace="team-a")
    assert len(objects) == len(list((CHART / "templates").glob("*.yaml")))
    assert [e for e in map(schema_errors, objects) if e] == []
    assert all(obj["metadata"]["namespace"] == "team-a" for obj in objects)


def test_the_deployment_has_replicas_probes_the_secret_and_hardening() -> None:
    deployment = orchestrator_deployment(render(OVERRIDES))
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
    for text, error in [
        ("{{- if .Values.a.b }}\n{{- if .Values.a.b }}\n{{- end }}\n{{- end }}\n", "nested"),
        ("{{- if .Values.a.b }}\nv: 1\n", "if without end"),
        ("{{- end }}\n", "end without if"),
        ("v: 1 {{- if .Values.a.b }}\n", "unsupported template action"),
    ]:
        (tmp_path / "templates" / "x.yaml").write_text("kind: X\n" + text)
        with pytest.raises(ValueError, match=error):
            render(chart=tmp_path)


@pytest.mark.parametrize(("value", "kept"), [(1, True), ("x", True), (0, False), ("", False), (False, False)])
def test_if_blocks_keep_their_lines_when_the_value_is_true(tmp_path: Path, value: object, kept: bool) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "values.yaml").write_text("a: {b: 1}\n")
    (tmp_path / "templates" / "x.yaml").write_text(
        "kind: X\nl:\n  - 1\n{{- if .Values.a.b }}\n  - 2\n{{- end }}\n"
    )
    assert render({"a": {"b": value}}, chart=tmp_path) == [{"kind": "X", "l": [1, 2] if kept else [1]}]


def test_each_replica_is_reached_directly_through_the_headless_gateway_service() -> None:
    kinds = by_kind(render(OVERRIDES))
    deployment = orchestrator_deployment(render(OVERRIDES))
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


def test_the_pull_secret_is_mounted_for_the_image_lookup_only_when_set() -> None:
    def orchestrator(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        pod = orchestrator_deployment(render(overrides))["spec"]["template"]["spec"]
        return pod, pod["containers"][0]

    pod, box = orchestrator(OVERRIDES)
    env = {e["name"]: e.get("value") for e in box["env"]}
    assert env["CAGE_K8S_IMAGE_PULL_SECRET"] == "cage-pull"
    mount = next(m for m in box["volumeMounts"] if m["name"] == "registry-auth")
    assert mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == "registry-auth")
    assert volume["secret"] == {
        "secretName": "cage-pull",
        "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
    }
    assert env["CAGE_K8S_REGISTRY_AUTH_FILE"] == f"{mount['mountPath']}/config.json"

    pod, box = orchestrator({})
    assert "CAGE_K8S_REGISTRY_AUTH_FILE" not in {e["name"] for e in box["env"]}
    assert "registry-auth" not in {v["name"] for v in pod["volumes"]}
    assert "registry-auth" not in {m["name"] for m in box["volumeMounts"]}


@pytest.mark.parametrize("overrides", [{}, OVERRIDES], ids=["defaults", "overrides"])
def test_the_egress_proxy_objects_are_the_backends(overrides: dict[str, Any]) -> None:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in render(overrides, namespace="team-a")}
    values = chart_values(overrides)["egress"]
    target = target_from(Settings(_env_file=None, k8s_namespace="team-a"))
    res = values["resources"]
    expected = [
        proxy_deployment(
            target,
            image=values["image"],
            replicas=values["replicaCount"],
            requests=(res["requests"]["cpu"], res["requests"]["memory"]),
            limits=(res["limits"]["cpu"], res["limits"]["memory"]),
        ),
        proxy_network_policy(target),
        services_manifests(target)[1],
    ]
    for obj in expected:
        chart = objects[(obj["kind"], obj["metadata"]["name"])]
        assert chart["spec"] == obj["spec"]
        assert obj["metadata"].get("labels", {}).items() <= chart["metadata"]["labels"].items()
    pod_labels = objects[("Deployment", "cage-egress")]["spec"]["template"]["metadata"]["labels"]
    assert Settings(_env_file=None).k8s_egress_selector.items() <= pod_labels.items()
