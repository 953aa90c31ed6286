"""Render the egress proxy's squid.conf from the isolated sandboxes that exist.

Pure text: no engine, no I/O. Squid tells sandboxes apart by client address: each sandbox is an
`EgressClient` with the source ranges its requests come from (on Docker its network's subnet, on
Kubernetes its pod's IPs as /32 or /128), a `src` ACL on them, and that sandbox's policy:

- Port `PROXY_PORT` (forward proxy): `none` allows nothing; `bridge` allows any destination whose
  addresses are all outside `BLOCKED_RANGES`; an allowlist allows exactly its entries (`dstdomain -n`
  for names, so a raw-IP request never matches a name; `dstdom_regex` for `*.` subdomains; `dst`
  for IP entries; `port` for `host:port`). Loopback, link-local and every sandbox subnet are
  refused first, in every mode.
- Port `GATEWAY_PORT` (reverse proxy, "accel"): relays to the model gateway that the sandbox's own
  orchestrator runs (`cache_peer ... originserver`); never anywhere else.

`front`: squid sits behind the proxy image's front (`images/egress/haproxy.cfg`), which holds those
two ports, so squid listens on loopback only (`FRONT_PORTS`) and takes each connection's client
address from the PROXY protocol header the front sends, from loopback alone. Squid closes and
reopens its ports on every reconfigure (one per sandbox that starts); the front keeps accepting
meanwhile and retries its connection to squid, so no other sandbox's connection is refused.

Denied requests are logged with the `cage` log format (`DENIAL_FORMAT`), one line each, to stdout.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from orchestrator.dsl.sandbox import AllowEntry
from orchestrator.sandbox.network import (
    ALWAYS_BLOCKED,
    BLOCKED_RANGES,
    GATEWAY_ALIAS,
    GATEWAY_PORT,
    PROXY_PORT,
    EgressPolicy,
)

FRONT_PORTS = {PROXY_PORT: 13128, GATEWAY_PORT: 18089}
"""Behind the front: the loopback port squid listens on for each port the front holds (the same
pairs as `images/egress/haproxy.cfg`; a unit test keeps them equal)."""
DENIAL_FORMAT = "%ts %>a %Ss %>Hs %rm %>rd %>rP"
"""Fields of each access log line: time, client IP, squid status, HTTP status, method, host, port."""
_SAFE = re.compile(r"[^a-z0-9]")


@dataclass(frozen=True)
class EgressClient:
    """One isolated sandbox as the proxy sees it: where its requests come from, what they may reach."""

    name: str
    """The engine's name for it (a Docker network, a pod): readable in the config, and unique."""
    sources: tuple[str, ...]
    """Its client addresses (CIDRs): a Docker network's only subnet, or a pod's IPs."""
    policy: EgressPolicy
    gateway: str | None = None
    """`host:port` of the model gateway as the proxy reaches it; None: no relay for this sandbox."""


def _src(cidr: str) -> str:
    """A source range as squid matches it: one address bare, a range as it is. In a container
    without IPv6 (Docker's default), squid turns its own IPv6 off ("BCP 177 violation") and then
    matches an IPv6 client (a PROXY header can name one) against a bare address only, never
    against a range, not even a `/128`."""
    net = ipaddress.ip_network(cidr)
    return str(net.network_address) if net.num_addresses == 1 else str(net)


def _acl_id(name: str) -> str:
    """A short, squid-safe ACL name unique to `name`."""
    return "sb_" + hashlib.sha256(name.encode()).hexdigest()[:12]


def _regex_host(host: str) -> str:
    return re.escape(host).replace("\\-", "-")


def _entry_acls(sb: str, index: int, entry: AllowEntry) -> tuple[list[str], list[str]]:
    """ACL lines for one allowlist entry and the names to AND on its `http_access` line."""
    lines: list[str] = []
    names: list[str] = []
    target = f"{sb}_e{index}"
    if entry.network is not None:
        lines.append(f"acl {target} dst {entry.network}")
    elif entry.wildcard:
        assert entry.host is not None
        lines.append(f"acl {target} dstdom_regex -n -i \\.{_regex_host(entry.host)}$")
    else:
        lines.append(f"acl {target} dstdomain -n {entry.host}")
    names.append(target)
    if entry.port is not None:
        lines.append(f"acl {target}_port port {entry.port}")
        names.append(f"{target}_port")
    return lines, names


def _listening(*, front: bool) -> list[str]:
    """squid.conf's `http_port` lines: the two ports sandboxes connect to or, with `front`, squid's
    loopback ports behind the front, where every connection must start with a PROXY protocol
    header and only loopback (the front) may send one."""
    ports = [(PROXY_PORT, "name=forward"), (GATEWAY_PORT, "accel defaultsite=cage-gateway name=gateway")]
    if not front:
        return [f"http_port {port} {options}" for port, options in ports]
    return [
        *(f"http_port 127.0.0.1:{FRONT_PORTS[p]} {options} require-proxy-header" for p, options in ports),
        "proxy_protocol_access allow localhost",
        "proxy_protocol_access deny all",
    ]


def render(clients: Iterable[EgressClient], *, never: Iterable[str], front: bool) -> str:
    """squid.conf for `clients`; `never` are the CIDRs every sandbox's address comes from (Docker:
    the subnet pool; Kubernetes: every sandbox pod's IP), never a destination. `front`: squid
    listens behind the image's front (module docstring)."""
    nets = sorted(clients, key=lambda n: n.name)
    out = [
        "# Rendered by Cage (orchestrator.sandbox.egress.squid); rewritten on every sandbox network change.",
        "pid_filename /run/squid/squid.pid",
        *_listening(front=front),
        "visible_hostname cage-egress",
        "cache deny all",
        "cache_mem 0",
        "pinger_enable off",
        "via off",
        "forwarded_for delete",
        "httpd_suppress_version_string on",
        "shutdown_lifetime 1 seconds",
        "client_persistent_connections on",
        "read_timeout 30 minutes",
        f"logformat cage {DENIAL_FORMAT}",
        "access_log stdio:/dev/stdout cage",
        "cache_log stdio:/dev/stderr",
        "acl forward myportname forward",
        "acl gateway myportname gateway",
        "acl CONNECT method CONNECT",
        f"acl cage_gateway_name dstdomain -n {GATEWAY_ALIAS}",
        f"acl cage_never dst {' '.join((*ALWAYS_BLOCKED, *never))}",
        f"acl cage_blocked dst {' '.join(BLOCKED_RANGES)}",
    ]
    peers: dict[str, str] = {}
    to_gateway: list[str] = []
    access: list[str] = []
    relay: list[str] = []
    for net in nets:
        sb = _acl_id(net.name)
        out.append(f"# {net.name}: {net.policy.key()}")
        out.append(f"acl {sb} src {' '.join(_src(source) for source in net.sources)}")
        if net.gateway is not None:
            peer = peers.setdefault(net.gateway, f"gw_{_SAFE.sub('_', net.gateway.lower())}")
            relay.append(f"cache_peer_access {peer} allow gateway {sb}")
            relay.append(f"cache_peer_access {peer} allow forward cage_gateway_name {sb}")
            to_gateway.append(f"http_access allow gateway {sb}")
            # a CLI that sends even `cage-gateway` to its proxy (ignoring NO_PROXY) still gets there
            to_gateway.append(f"http_access allow forward !CONNECT cage_gateway_name {sb}")
        if net.policy.mode == "bridge":
            access.append(f"http_access allow forward {sb} !cage_blocked")
        elif net.policy.mode == "allow":
            for index, entry in enumerate(net.policy.allow):
                lines, names = _entry_acls(sb, index, entry)
                out.extend(lines)
                access.append(f"http_access allow forward {sb} {' '.join(names)}")
    for gateway, peer in sorted(peers.items()):
        host, _, port = gateway.rpartition(":")
        # PASSTHRU: the sandbox's gateway token (`Authorization: Bearer`) must reach the gateway
        options = f"0 no-query no-digest originserver login=PASSTHRU name={peer}"
        out.append(f"cache_peer {host} parent {port} {options}")
    out.extend(relay)
    out.extend(f"cache_peer_access {peer} deny all" for peer in sorted(peers.values()))
    out.append("never_direct allow gateway")
    out.append("never_direct allow cage_gateway_name")
    out.extend(to_gateway)
    out.append("http_access deny gateway")
    out.append("http_access deny cage_never")
    out.extend(access)
    out.append("http_access deny all")
    return "\n".join(out) + "\n"
