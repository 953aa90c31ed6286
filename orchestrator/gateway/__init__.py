"""The model gateway: keys never enter the cage.

Runners get a per-turn token as their API key and a base URL pointing here; the gateway maps
the token to its sandbox, owner and turn, forwards to the connector's real host with the real
credentials, streams the answer back unbuffered, and meters usage.
"""

from orchestrator.gateway.address import GatewayAddress, sandbox_base_url
from orchestrator.gateway.grants import Grant, GrantRegistry, Upstream
from orchestrator.gateway.server import GatewayError, ModelGateway, SandboxAccess

__all__ = [
    "GatewayAddress",
    "GatewayError",
    "Grant",
    "GrantRegistry",
    "ModelGateway",
    "SandboxAccess",
    "Upstream",
    "sandbox_base_url",
]
