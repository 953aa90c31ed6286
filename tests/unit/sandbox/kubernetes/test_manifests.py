"""The pure Kubernetes manifests: golden objects, schema-valid, and the name/label rules."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.sandbox.backend import BindMount
from orchestrator.sandbox.kubernetes.manifests import (
    POLICY_LABEL,
    image_ref,
    k8s_labels,
    label_annotations,
    label_value,
    network_policy_manifest,
    pod_manifest,
    pod_name,
    read_labels,
)
from orchestrator.sandbox.network import PROXY_PORT, EgressPolicy
from tests.golden.k8s.cases import ALLOWLIST, HARDENED, HERE, TARGET, cases, render
from tests.golden.k8s.schema import schema_errors

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?")


@pytest.mark.parametrize("name", sorted(cases()))
def test_golden_objects_are_unchanged_and_schema_valid(name: str) -> None:
    obj = cases()[name]
    assert render(obj) == (HERE / name).read_text(), "run `python -m tests.golden.k8s.regenerate`"
    assert schema_errors(obj) is None


def test_the_validator_refuses_an_unknown_field() -> None:
    pod = pod_manifest(HARDENED, TARGET)
    pod["spec"]["containers"][0]["privileged"] = True  # belongs in securityContext
    assert "privileged" in (schema_errors(pod) or "")


def test_the_pod_is_hardened_and_sized_from_the_spec() -> None:
    pod = pod_manifest(HARDENED, TARGET)
    spec = pod["spec"]
    box = spec["containers"][0]
    ctx = box["securityContext"]
    assert ctx["runAsNonRoot"] and not ctx["allowPrivilegeEscalation"] and not ctx["privileged"]
    assert ctx["capabilities"] == {"drop": ["ALL"]} and ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    assert ctx["readOnlyRootFilesystem"] is True and ctx["runAsUser"] == 1000
    assert box["resources"]["limits"] == {
        "memory": str(2 * 2**30),
        "cpu": "1500m",
        "ephemeral-storage": str(5 * 2**30),
    }
    assert spec["runtimeClassName"] == "gvisor" and spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["fsGroup"] == 1000 and spec["terminationGracePeriodSeconds"] == 5
    assert box["image"] == "registry.example:5000/cage/cage/runner-claude:3f2a9c0d"
    assert {v["name"]: v.get("emptyDir") for v in spec["volumes"]}["t0"] == {
        "medium": "Memory",
        "sizeLimit": "64Mi",
    }
    writable = pod_manifest(ALLOWLIST, TARGET)["spec"]["containers"][0]["securityContext"]
    assert writable["readOnlyRootFilesystem"] is False


def test_what_a_pod_cannot_be_is_refused() -> None:
    with pytest.raises(ValueError, match="bind mount"):
        pod_manifest(
            HARDENED.model_copy(update={"mounts": (BindMount(source="/src", target="/src"),)}), TARGET
        )
    with pytest.raises(ValueError, match="non-root"):
        pod_manifest(HARDENED.model_copy(update={"user": "0:0"}), TARGET)


def test_none_reaches_only_dns_and_the_gateway_the_others_also_the_proxy() -> None:
    none = network_policy_manifest(HARDENED, EgressPolicy(mode="none"), TARGET)["spec"]
    bridge = network_policy_manifest(HARDENED, EgressPolicy(mode="bridge"), TARGET)["spec"]
    assert none["ingress"] == [] and none["policyTypes"] == ["Ingress", "Egress"]
    assert [r["ports"][0]["port"] for r in none["egress"]] == [53, 8089]
    assert [r["ports"][0]["port"] for r in bridge["egress"]] == [53, 8089, PROXY_PORT]
    assert none["podSelector"]["matchLabels"] == {POLICY_LABEL: pod_name(HARDENED.name)}


@given(st.text(min_size=1, max_size=300))
def test_pod_names_are_dns_labels_and_injective_on_rewrites(name: str) -> None:
    made = pod_name(name)
    assert DNS_LABEL.fullmatch(made)
    if made != name:
        assert made != pod_name(name + "x")


@given(st.dictionaries(st.sampled_from(["cage.owner", "cage.session", "x"]), st.text(max_size=200)))
def test_label_values_are_valid_and_read_back_exactly(labels: dict[str, str]) -> None:
    made = k8s_labels(labels)
    assert all(LABEL_VALUE.fullmatch(v) for v in made.values())
    assert read_labels(made, label_annotations(labels)) == labels
    assert label_value("true") == "true"


def test_only_local_tags_get_the_registry() -> None:
    assert image_ref("cage/runner:1", "reg:5000/x") == "reg:5000/x/cage/runner:1"
    assert image_ref("ghcr.io/o/i:1", "reg:5000/x") == "ghcr.io/o/i:1"
    assert image_ref("cage/runner:1", "") == "cage/runner:1"
