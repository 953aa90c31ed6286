"""A test's own egress proxy (a container name no other test uses) and what it answers this host."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from orchestrator.sandbox.docker.egress import DockerEgress
from orchestrator.sandbox.network import PROXY_PORT
from orchestrator.settings import Settings

REFUSED_URL = "http://192.0.2.7:81/"
"""An address no policy names, not a name: the proxy refuses it without a lookup (this host may
have no DNS)."""


@dataclass(frozen=True)
class OwnProxy:
    name: str
    settings: Settings
    egress: DockerEgress

    def address(self, info: dict[str, Any]) -> str:
        """The proxy's address on its network, from its container's inspect data."""
        return str(info["NetworkSettings"]["Networks"][self.settings.egress_network]["IPAddress"])


def proxy_answer(ip: str, url: str = REFUSED_URL) -> bytes:
    """The proxy's whole answer to a request for `url` from this host."""
    with socket.create_connection((ip, PROXY_PORT), timeout=10) as conn:
        conn.sendall(f"GET {url} HTTP/1.0\r\n\r\n".encode())
        return b"".join(iter(lambda: conn.recv(4096), b""))
