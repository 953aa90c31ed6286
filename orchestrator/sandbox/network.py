"""A sandbox's egress policy, engine-neutral: what `computer.network` allows and how a box gets out.

Every isolated sandbox sits alone on a network of its own with no route out. The only other
member is Cage's egress proxy, which is reachable inside that network under two names:
`PROXY_ALIAS` (a forward proxy that enforces the policy; CLIs find it through `HTTP(S)_PROXY`)
and `GATEWAY_ALIAS` (a relay to Cage's model gateway, the one destination every mode allows, so
that keys stay outside the box). The Docker implementation lives in `orchestrator.sandbox.docker.egress`;
a Kubernetes one would be a NetworkPolicy plus the same proxy.

Modes (`computer.network`):
- `none`: nothing but the model gateway.
- `bridge`: any public host through the proxy; never private ranges, link-local (cloud metadata),
  loopback, the host or another sandbox.
- `{allow: [...]}`: only the listed names (`*.` wildcards), `host:port` entries and IPs/CIDRs. A
  listed name may resolve to a private address: that is how a box opts in to a host service.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.dsl.sandbox import (
    NEVER_ALLOWED,
    AllowEntry,
    ComputerSpec,
    NetworkAllowlist,
    parse_allow_entry,
)

GATEWAY_ALIAS = "cage-gateway"
"""The model gateway's name inside every sandbox network (an alias of the egress container)."""
GATEWAY_PORT = 8089
"""The port the relay listens on for the model gateway."""
PROXY_ALIAS = "cage-egress"
"""The forward proxy's name inside every sandbox network."""
PROXY_PORT = 3128

NO_PROXY = ("localhost", "127.0.0.1", "::1", GATEWAY_ALIAS, f".{GATEWAY_ALIAS}")
"""Hosts a CLI reaches directly: its own loopback and the gateway relay (on Kubernetes one
replica's gateway, `<pod-ip>.cage-gateway`: the leading dot is the suffix form every client reads)."""

BLOCKED_RANGES: tuple[str, ...] = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "::ffff:0:0/96",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
)
"""Destinations `bridge` never reaches: private, shared, link-local (169.254.169.254), loopback,
multicast and reserved ranges, and IPv4-mapped IPv6 (which would smuggle any of those)."""
ALWAYS_BLOCKED = NEVER_ALLOWED
"""Blocked in every mode, allowlists included: the proxy's own loopback and link-local metadata."""

NetworkMode = Literal["none", "bridge", "allow"]


class EgressPolicy(BaseModel):
    """What one sandbox may reach through the proxy (the gateway relay is always allowed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: NetworkMode
    allow: tuple[AllowEntry, ...] = ()
    """The allowlist, parsed (`allow` mode only)."""

    def key(self) -> str:
        """A stable text form (labels, config hash): `none`, `bridge` or `allow:a,b:443,...`."""
        if self.mode != "allow":
            return self.mode
        return "allow:" + ",".join(entry.text for entry in self.allow)

    @classmethod
    def from_key(cls, key: str) -> EgressPolicy:
        """The inverse of `key()` (a label read back from the engine).

        Raises:
            ValueError: `key` is not a policy Cage wrote.
        """
        if key == "none":
            return cls(mode="none")
        if key == "bridge":
            return cls(mode="bridge")
        head, sep, rest = key.partition(":")
        if head != "allow" or not sep or not rest:
            raise ValueError(f"not an egress policy: {key!r}")
        return cls(mode="allow", allow=tuple(parse_allow_entry(part) for part in rest.split(",")))


def egress_policy(network: Literal["none", "bridge"] | NetworkAllowlist) -> EgressPolicy:
    """The policy for a `computer.network` value."""
    if isinstance(network, NetworkAllowlist):
        return EgressPolicy(mode="allow", allow=tuple(parse_allow_entry(h) for h in network.allow))
    return EgressPolicy(mode=network)


def sandbox_egress(computer: ComputerSpec, *, isolated: bool) -> EgressPolicy | None:
    """The policy of an isolated sandbox, or None for one on the engine's shared network.

    An allowlist is always isolated (only the proxy can enforce it); `none` and `bridge` are when
    the operator turned isolation on (`Settings.isolated_networks`). A box that publishes ports is
    isolated too: the engine cannot publish them from an internal network, so a relay beside the
    box publishes them and forwards inbound connections to it (the DSL still refuses ports next to
    an allowlist).
    """
    if isinstance(computer.network, NetworkAllowlist):
        return egress_policy(computer.network)
    if isolated:
        return egress_policy(computer.network)
    return None


def proxy_env() -> Mapping[str, str]:
    """Proxy variables for every process in an isolated box, in both spellings (curl reads only
    the lower-case `http_proxy`; Go and Node tools read either)."""
    proxy = f"http://{PROXY_ALIAS}:{PROXY_PORT}"
    no_proxy = ",".join(NO_PROXY)
    env: dict[str, str] = {}
    for name, value in (("HTTP_PROXY", proxy), ("HTTPS_PROXY", proxy), ("NO_PROXY", no_proxy)):
        env[name] = value
        env[name.lower()] = value
    return env


def gateway_base_url() -> str:
    """The model gateway's root URL as seen from inside an isolated sandbox."""
    return f"http://{GATEWAY_ALIAS}:{GATEWAY_PORT}"


def replica_gateway_url(pod_ip: str, port: int) -> str:
    """The model gateway of one orchestrator pod as a sandbox pod reaches it: the DNS name the
    cluster DNS gives that pod as an endpoint of the headless `cage-gateway` Service (its IP with
    dashes, `10-1-2-3.cage-gateway`), so a turn's calls reach the replica holding its token."""
    return f"http://{pod_ip.replace('.', '-').replace(':', '-')}.{GATEWAY_ALIAS}:{port}"


def in_ranges(address: str, ranges: tuple[str, ...]) -> bool:
    """Whether IP `address` lies in one of `ranges` (for validation messages and tests)."""
    ip = ipaddress.ip_address(address)
    return any(ip in ipaddress.ip_network(r) for r in ranges)
