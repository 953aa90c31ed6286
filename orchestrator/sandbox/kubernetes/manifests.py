"""`CreateSpec` -> Pod, PersistentVolumeClaim and NetworkPolicy objects, as plain dicts. No I/O.

Kubernetes is stricter than Docker about names and labels, so:
- a pod's name is `pod_name(spec.name)` (RFC 1123, lower case, unique even when rewritten) and the
  Cage name is kept in the `cage.name` annotation;
- a label value that Kubernetes refuses (longer than 63 characters, other characters) is stored
  as `h-<digest>` and the exact value in an annotation of the same key, so `find` selects on the
  label and compares the annotation (`label_value`, `read_labels`).

Every pod is hardened the same way: runAsNonRoot, allowPrivilegeEscalation false, every capability
dropped, seccomp RuntimeDefault, no service-account token, and the `computer` limits as resources.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from orchestrator.sandbox.backend import BindMount, CreateSpec, VolumeMount
from orchestrator.sandbox.network import GATEWAY_ALIAS, GATEWAY_PORT, PROXY_ALIAS, PROXY_PORT, EgressPolicy

Manifest = dict[str, Any]

NAME_ANNOTATION = "cage.name"
"""The Cage name of a pod or a PVC (its engine name may be rewritten by `pod_name`)."""
POLICY_LABEL = "cage.egress-policy"
"""On a NetworkPolicy: the pod name it isolates (the reaper removes policies whose pod is gone)."""
EGRESS_ANNOTATION = "cage.egress"
"""On an isolated pod and its NetworkPolicy: the sandbox's `EgressPolicy.key()`, which the egress
proxies' configuration is rendered from (`orchestrator.sandbox.kubernetes.egress`)."""
MAIN_CONTAINER = "sandbox"
_MAX_NAME = 63
_NAME_BAD = re.compile(r"[^a-z0-9-]+")
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?")
_TMPFS_SIZE = re.compile(r"(?:^|,)size=(\d+)([kmgKMG]?)(?:,|$)")
_DNS_PORT = 53


class KubeTarget(BaseModel):
    """Where and how sandbox objects go: the part of `Settings` the manifests need."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    namespace: str
    registry: str = ""
    runtime_class: str | None = None
    storage_class: str | None = None
    workspace_size: str = "10Gi"
    run_as_user: int = 1000
    image_pull_secret: str | None = None
    egress_selector: Mapping[str, str]
    gateway_selector: Mapping[str, str]
    gateway_port: int = GATEWAY_PORT
    """The model gateway's port on the orchestrator pods (sandboxes reach a replica's pod directly)."""


def _digest(text: str, n: int = 10) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def pod_name(name: str) -> str:
    """`name` as a DNS label (the pod, PVC and policy name): lower case, at most 63 characters,
    with a digest of the original appended whenever it had to be rewritten (so it stays unique)."""
    low = _NAME_BAD.sub("-", name.lower()).strip("-")
    if low == name and len(low) <= _MAX_NAME:
        return low
    head = (low or "cage")[: _MAX_NAME - 11].strip("-") or "cage"
    return f"{head}-{_digest(name)}"


def label_value(value: str) -> str:
    """`value` if Kubernetes accepts it as a label value, else `h-<digest>` (the exact value is
    kept in the annotation of the same key)."""
    if len(value) <= _MAX_NAME and _LABEL_VALUE.fullmatch(value):
        return value
    return f"h-{_digest(value, 40)}"


def k8s_labels(labels: Mapping[str, str]) -> dict[str, str]:
    return {key: label_value(value) for key, value in labels.items()}


def label_annotations(labels: Mapping[str, str]) -> dict[str, str]:
    """Exact values of the labels whose label value had to be digested."""
    return {key: value for key, value in labels.items() if label_value(value) != value}


def read_labels(
    metadata_labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None
) -> dict[str, str]:
    """The Cage labels of an object: each label's exact value from its annotation when it has one."""
    notes = annotations or {}
    return {key: notes.get(key, value) for key, value in (metadata_labels or {}).items()}


def image_ref(image: str, registry: str) -> str:
    """The image as the cluster pulls it: `<registry>/<name:tag>` for a local tag, else unchanged."""
    if not registry:
        return image
    first = image.split("/", 1)[0]
    qualified = "/" in image and ("." in first or ":" in first or first == "localhost")
    return image if qualified else f"{registry.rstrip('/')}/{image}"


def _quantity_cpu(nano: int) -> str:
    return f"{max(1, nano // 1_000_000)}m"


def _tmpfs_limit(options: str) -> str | None:
    found = _TMPFS_SIZE.search(options)
    if not found:
        return None
    unit = {"": "", "k": "Ki", "m": "Mi", "g": "Gi"}[found.group(2).lower()]
    return f"{found.group(1)}{unit}"


def _user(spec: CreateSpec, target: KubeTarget) -> tuple[int, int]:
    """uid, gid of the pod: a numeric `user[:group]` as given, a user name maps to `run_as_user`."""
    uid_text, _, gid_text = spec.user.partition(":")
    uid = int(uid_text) if uid_text.isdigit() else target.run_as_user
    gid = int(gid_text) if gid_text.isdigit() else uid
    return uid, gid


def _volume_name(index: int) -> str:
    return f"v{index}"


def pod_manifest(spec: CreateSpec, target: KubeTarget) -> Manifest:
    """The Pod of one sandbox. Raises ValueError for what a pod cannot be (a host bind mount, root)."""
    uid, gid = _user(spec, target)
    if uid == 0:
        raise ValueError(f"sandbox {spec.name}: pods run as non-root (user {spec.user!r})")
    volumes: list[Manifest] = []
    mounts: list[Manifest] = []
    fs_group: int | None = None
    for index, mount in enumerate(spec.mounts):
        if isinstance(mount, BindMount):
            raise ValueError(f"sandbox {spec.name}: a host bind mount ({mount.source}) has no pod equivalent")
        assert isinstance(mount, VolumeMount)
        claim = {"claimName": pod_name(mount.source), "readOnly": mount.read_only}
        volumes.append({"name": _volume_name(index), "persistentVolumeClaim": claim})
        mounts.append({"name": _volume_name(index), "mountPath": mount.target, "readOnly": mount.read_only})
        if mount.owner is not None:
            fs_group = mount.owner[1]
    for index, (path, options) in enumerate(sorted(spec.tmpfs.items())):
        name = f"t{index}"
        empty: Manifest = {"medium": "Memory"}
        size = _tmpfs_limit(options)
        if size:
            empty["sizeLimit"] = size
        volumes.append({"name": name, "emptyDir": empty})
        mounts.append({"name": name, "mountPath": path})
    limits: dict[str, str] = {}
    if spec.limits.memory_bytes:
        limits["memory"] = str(spec.limits.memory_bytes)
    if spec.limits.nano_cpus:
        limits["cpu"] = _quantity_cpu(spec.limits.nano_cpus)
    if spec.limits.disk_bytes:
        limits["ephemeral-storage"] = str(spec.limits.disk_bytes)
    container: Manifest = {
        "name": MAIN_CONTAINER,
        "image": image_ref(spec.image, target.registry),
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": k, "value": v} for k, v in sorted(spec.env.items())],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": gid,
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": spec.read_only,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "resources": {"limits": limits, "requests": dict(limits)},
        "volumeMounts": mounts,
        "stdin": False,
        "tty": False,
    }
    if spec.command:
        container["command"] = list(spec.command)
    if spec.workdir:
        container["workingDir"] = spec.workdir
    if spec.ports:
        container["ports"] = [
            {"containerPort": p.container_port, "protocol": p.protocol.upper()} for p in spec.ports
        ]
    pod_security: Manifest = {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if fs_group is not None:
        pod_security["fsGroup"] = fs_group
        pod_security["fsGroupChangePolicy"] = "OnRootMismatch"
    pod_spec: Manifest = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "shareProcessNamespace": False,
        "hostNetwork": False,
        "hostPID": False,
        "hostIPC": False,
        "securityContext": pod_security,
        "containers": [container],
        "volumes": volumes,
    }
    if spec.stop_timeout is not None:
        pod_spec["terminationGracePeriodSeconds"] = spec.stop_timeout
    if target.runtime_class:
        pod_spec["runtimeClassName"] = target.runtime_class
    if target.image_pull_secret:
        pod_spec["imagePullSecrets"] = [{"name": target.image_pull_secret}]
    if spec.extra_hosts:
        by_ip: dict[str, list[str]] = {}
        for host, ip in sorted(spec.extra_hosts.items()):
            if ip != "host-gateway":  # no pod equivalent of Docker's host gateway: cage-gateway is
                by_ip.setdefault(ip, []).append(host)
        if by_ip:
            pod_spec["hostAliases"] = [{"ip": ip, "hostnames": names} for ip, names in by_ip.items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(spec.name),
            "namespace": target.namespace,
            "labels": k8s_labels(spec.labels),
            "annotations": {NAME_ANNOTATION: spec.name, **label_annotations(spec.labels)},
        },
        "spec": pod_spec,
    }


def pvc_manifest(
    name: str, labels: Mapping[str, str], target: KubeTarget, *, size: str | None = None
) -> Manifest:
    """The PersistentVolumeClaim of one workspace volume (ReadWriteOnce, `workspace_size`)."""
    spec: Manifest = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size or target.workspace_size}},
    }
    if target.storage_class:
        spec["storageClassName"] = target.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": pod_name(name),
            "namespace": target.namespace,
            "labels": k8s_labels(labels),
            "annotations": {NAME_ANNOTATION: name, **label_annotations(labels)},
        },
        "spec": spec,
    }


DNS_RULE: Manifest = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ],
    "ports": [{"protocol": "UDP", "port": _DNS_PORT}, {"protocol": "TCP", "port": _DNS_PORT}],
}
"""An egress rule to the cluster DNS (CoreDNS, labelled `k8s-app: kube-dns` in kube-system)."""


def _peer(selector: Mapping[str, str], port: int) -> Manifest:
    return {
        "to": [{"podSelector": {"matchLabels": dict(selector)}}],
        "ports": [{"protocol": "TCP", "port": port}],
    }


def network_policy_manifest(spec: CreateSpec, policy: EgressPolicy, target: KubeTarget) -> Manifest:
    """The NetworkPolicy of one isolated sandbox: no ingress, no egress but DNS, the model gateway
    and (for `bridge` and allowlists, which the proxy enforces) the egress proxy.

    `none` is complete here: with no route to the proxy, the box reaches nothing but the gateway.
    """
    name = pod_name(spec.name)
    egress = [DNS_RULE, _peer(target.gateway_selector, target.gateway_port)]
    if policy.mode != "none":
        egress.append(_peer(target.egress_selector, PROXY_PORT))
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": target.namespace,
            "labels": {**k8s_labels(spec.labels), POLICY_LABEL: name},
            "annotations": {NAME_ANNOTATION: spec.name, EGRESS_ANNOTATION: policy.key()[:4096]},
        },
        "spec": {
            "podSelector": {"matchLabels": {POLICY_LABEL: name}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": egress,
        },
    }


def isolated_pod(pod: Manifest, policy: EgressPolicy) -> Manifest:
    """`pod` carrying the label its NetworkPolicy selects and its policy, whole (the proxies'
    configuration is rendered from the pods)."""
    meta = pod["metadata"]
    labels = {**meta["labels"], POLICY_LABEL: meta["name"]}
    notes = {**meta["annotations"], EGRESS_ANNOTATION: policy.key()}
    return {**pod, "metadata": {**meta, "labels": labels, "annotations": notes}}


def services_manifests(target: KubeTarget) -> list[Manifest]:
    """The two Services every isolated sandbox reaches by name: `cage-gateway` (the orchestrator's
    model gateway) and `cage-egress` (the forward proxy). The Helm chart ships the same two.

    `cage-gateway` is headless and publishes not-ready pods: it balances nothing, it gives each
    orchestrator pod the DNS name `<ip-with-dashes>.cage-gateway` by which a sandbox reaches the
    gateway of the replica that runs its turn (the one holding the turn's token), also while that
    replica's `/readyz` fails mid-turn.
    """
    gateway = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": GATEWAY_ALIAS, "namespace": target.namespace},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": dict(target.gateway_selector),
            "ports": [
                {
                    "name": "gateway",
                    "protocol": "TCP",
                    "port": target.gateway_port,
                    "targetPort": target.gateway_port,
                }
            ],
        },
    }
    proxy = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": PROXY_ALIAS, "namespace": target.namespace},
        "spec": {
            "selector": dict(target.egress_selector),
            "ports": [{"name": "proxy", "protocol": "TCP", "port": PROXY_PORT, "targetPort": PROXY_PORT}],
        },
    }
    return [gateway, proxy]
