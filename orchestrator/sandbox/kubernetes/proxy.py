"""The egress proxy's Deployment and NetworkPolicy (plain dicts, no I/O): what the Helm chart's
`egress-*.yaml` templates render (a unit test holds them equal) and what `tests/k8s` deploys.

The `cage-egress` Service is in `manifests.services_manifests`. The pods run the cage/egress
image (`cage images push` pushes it) as its `proxy` user with a read-only root: squid writes only
its pid and the configuration Cage renders, both in an `emptyDir` (`egress.CONF`).
"""

from __future__ import annotations

from orchestrator.sandbox.kubernetes.egress import EGRESS_CONTAINER, READY_SCRIPT, START_SCRIPT
from orchestrator.sandbox.kubernetes.manifests import DNS_RULE, POLICY_LABEL, KubeTarget, Manifest
from orchestrator.sandbox.network import PROXY_ALIAS, PROXY_PORT

PROXY_UID = 13
"""Debian's `proxy` user, which the image runs squid as (numeric: `runAsNonRoot` checks it)."""
OUTSIDE = (
    {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.0.0/16"]}},
    {"ipBlock": {"cidr": "::/0", "except": ["fe80::/10"]}},
)
"""Where the proxy may connect: anywhere but link-local (cloud metadata). Squid's rules decide per
sandbox; this is the pod's own bound."""


def proxy_deployment(
    target: KubeTarget,
    *,
    image: str,
    replicas: int = 2,
    requests: tuple[str, str] = ("100m", "128Mi"),
    limits: tuple[str, str] = ("1", "256Mi"),
) -> Manifest:
    """The `cage-egress` Deployment: `replicas` squid pods, each configured by Cage over pods/exec.

    `requests` and `limits` are (cpu, memory).
    """
    labels = dict(target.egress_selector)
    container: Manifest = {
        "name": EGRESS_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", START_SCRIPT],
        "ports": [{"name": "proxy", "containerPort": PROXY_PORT, "protocol": "TCP"}],
        "readinessProbe": {
            "exec": {"command": ["sh", "-c", READY_SCRIPT]},
            "periodSeconds": 5,
            "timeoutSeconds": 5,
            "failureThreshold": 2,
        },
        "livenessProbe": {
            "tcpSocket": {"port": PROXY_PORT},
            "initialDelaySeconds": 10,
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": PROXY_UID,
            "runAsGroup": PROXY_UID,
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {
            "requests": {"cpu": requests[0], "memory": requests[1]},
            "limits": {"cpu": limits[0], "memory": limits[1]},
        },
        "volumeMounts": [
            {"name": "run", "mountPath": "/run/squid"},
            {"name": "spool", "mountPath": "/var/spool/squid"},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": PROXY_ALIAS, "namespace": target.namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": PROXY_UID,
                        "runAsGroup": PROXY_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [
                        {"name": "run", "emptyDir": {"sizeLimit": "16Mi"}},
                        {"name": "spool", "emptyDir": {"sizeLimit": "16Mi"}},
                    ],
                },
            },
        },
    }


def proxy_network_policy(target: KubeTarget) -> Manifest:
    """The proxy pods': in, only isolated sandbox pods on the proxy port; out, DNS and `OUTSIDE`."""
    labels = dict(target.egress_selector)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": PROXY_ALIAS, "namespace": target.namespace, "labels": labels},
        "spec": {
            "podSelector": {"matchLabels": dict(target.egress_selector)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {
                    "from": [
                        {"podSelector": {"matchExpressions": [{"key": POLICY_LABEL, "operator": "Exists"}]}}
                    ],
                    "ports": [{"protocol": "TCP", "port": PROXY_PORT}],
                }
            ],
            "egress": [DNS_RULE, {"to": list(OUTSIDE)}],
        },
    }
