"""The port relay of an isolated sandbox that publishes `computer.ports`, on the Docker engine.

The engine cannot publish ports from an internal network, so an isolated box publishes none
itself. Its relay does: a small container from the egress image (`socat`) on
`Settings.egress_network`, which publishes each port on 127.0.0.1 (the same `host_port` rules as a
box on the shared bridge) and joins the box's network, where it forwards each accepted connection
to the box by its container name. It only relays inbound connections: the box gets no route
through it (the box cannot add one without `NET_ADMIN`, and the relay's namespace has IP forwarding
off anyway). It runs as the image's non-root user with every capability dropped and a read-only
root file system, and carries labels (`cage.egress=ports`, the box's name) but never `cage.sandbox`,
so reconcile does not take it for a box; removing the box's network removes it first.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

import docker.errors

from orchestrator.sandbox.backend import PortBinding
from orchestrator.sandbox.docker.errors import engine_errors
from orchestrator.settings import Settings

RELAY_SUFFIX = "-ports"
RELAY_USER = "proxy"
"""The egress image's unprivileged user (Debian's squid package creates it)."""


def relay_name(sandbox: str) -> str:
    """The relay container of sandbox `sandbox` (box names are unique, so relay names are)."""
    return f"{sandbox}{RELAY_SUFFIX}"


def relay_command(sandbox: str, ports: Sequence[PortBinding]) -> list[str]:
    """One `socat` per port, listening on the box's own port number and forwarding to the box."""
    target = shlex.quote(sandbox)
    relays = []
    for p in ports:
        port = p.container_port
        if p.protocol == "udp":
            relays.append(f"socat UDP-RECVFROM:{port},fork UDP-SENDTO:{target}:{port}")
        else:
            relays.append(f"socat TCP-LISTEN:{port},fork,reuseaddr TCP:{target}:{port}")
    return ["sh", "-c", " & ".join(relays) + " & wait"]


def create_relay(
    api: Any,
    settings: Settings,
    *,
    image: str,
    sandbox: str,
    network: str,
    ports: Sequence[PortBinding],
    labels: dict[str, str],
) -> str:
    """Create, connect and start `sandbox`'s relay; its container id. Leaves nothing on failure.

    Raises:
        SandboxError: the engine refused (a fixed `host_port` already taken, no such image).
    """
    name = relay_name(sandbox)
    host_config = api.create_host_config(
        network_mode=settings.egress_network,
        port_bindings={f"{p.container_port}/{p.protocol}": ("127.0.0.1", p.host_port or None) for p in ports},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges:true"],
        read_only=True,
        mem_limit=64 * 2**20,
        pids_limit=64 + 8 * len(ports),
        init=True,
        # ports below 1024 without a capability; never a router between the box and the outside
        sysctls={"net.ipv4.ip_unprivileged_port_start": "0", "net.ipv4.ip_forward": "0"},
    )
    with engine_errors(name):
        remove_relay(api, sandbox)  # a leftover of a box removed behind Cage's back
        created = api.create_container(
            image=image,
            name=name,
            user=RELAY_USER,
            command=relay_command(sandbox, ports),
            labels=labels,
            host_config=host_config,
            ports=[(p.container_port, p.protocol) for p in ports],
        )
        try:
            api.connect_container_to_network(created["Id"], network)
            api.start(created["Id"])
        except BaseException:
            api.remove_container(created["Id"], force=True)
            raise
    return str(created["Id"])


def start_relay(api: Any, sandbox: str) -> None:
    """Start `sandbox`'s relay if it has one that is not running (a box started again)."""
    name = relay_name(sandbox)
    with engine_errors(name):
        try:
            data = api.inspect_container(name)
        except docker.errors.NotFound:
            return
        if not (data.get("State") or {}).get("Running"):
            api.start(data["Id"])


def remove_relay(api: Any, sandbox: str) -> None:
    """Remove `sandbox`'s relay; a missing one, or one another caller is removing, is fine."""
    try:
        api.remove_container(relay_name(sandbox), force=True)
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise
