"""Where the model gateway listens, and the URL a sandbox uses to reach it.

The gateway must be reachable from containers but from nowhere else that matters. On a Linux
host with a local engine it binds the address of Docker's default bridge (`docker0`, usually
`172.17.0.1`): containers reach it as `host.docker.internal` (the `host-gateway` entry every
bridged sandbox gets), while other machines on the host's networks cannot. Where there is no
`docker0` (the orchestrator itself in a container, Docker Desktop, a remote engine) it binds
all interfaces of its own network namespace. Either way every request needs a live per-turn
token, so reaching the port gives nothing without one.
"""

from __future__ import annotations

import fcntl
import socket
import struct
from dataclasses import dataclass

from orchestrator.sandbox.network import gateway_base_url, replica_gateway_url

BRIDGE_INTERFACE = "docker0"
"""Docker's default bridge on a Linux host."""
CONTAINER_HOST_ALIAS = "host.docker.internal"
"""The name bridged sandboxes resolve to the engine's host (`extra_hosts: host-gateway`)."""
ALL_INTERFACES = "0.0.0.0"
_SIOCGIFADDR = 0x8915


@dataclass(frozen=True)
class GatewayAddress:
    """The address the gateway is bound to (after start: the real port, never 0)."""

    host: str
    port: int

    @property
    def url(self) -> str:
        """The root URL on the host side (for the orchestrator itself and tests)."""
        host = "127.0.0.1" if self.host == ALL_INTERFACES else self.host
        return f"http://{host}:{self.port}"


def sandbox_base_url(address: GatewayAddress, *, isolated: bool = False, pod_ip: str = "") -> str:
    """The gateway's root URL as seen from inside a sandbox.

    On Kubernetes (`pod_ip`, the orchestrator pod's own address) a sandbox pod reaches this
    replica's gateway directly, by its DNS name under the headless `cage-gateway` Service. An
    isolated Docker sandbox (a network of its own behind the egress proxy) reaches it as
    `cage-gateway:8089`, the proxy's relay to `address`; one on Docker's shared bridge through the
    host-gateway alias.
    """
    if pod_ip:
        return replica_gateway_url(pod_ip, address.port)
    if isolated:
        return gateway_base_url()
    return f"http://{CONTAINER_HOST_ALIAS}:{address.port}"


def interface_address(name: str) -> str | None:
    """The IPv4 address of network interface `name`, or None when it does not exist (Linux)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def default_bind_host() -> str:
    """The bridge address when this host runs the engine's default bridge, else all interfaces."""
    return interface_address(BRIDGE_INTERFACE) or ALL_INTERFACES
