"""Per-sandbox networks and the shared egress proxy on the Docker engine.

* Every isolated sandbox gets a network of its own: `internal` (no route out, no NAT), with
  `inhibit_ipv4` so the host's bridge interface has no address the box could reach the host's
  services on, and a small subnet (/28) from `Settings.egress_subnet_pool` so a hundred boxes never
  exhaust the engine's default address pools. Its only other member is the proxy. Inter-container
  traffic stays on inside it (the box must reach the proxy); it cannot reach another box, because
  no other box is on its network and the proxy does not route (and refuses every sandbox subnet).
* The proxy is one long-lived container (`Settings.egress_container`, squid, `images/egress/`;
  made, started and rewritten by `orchestrator.sandbox.docker.proxy.EgressProxy`) on
  `Settings.egress_network` (the outside, and the gateway's host). It joins each sandbox network
  with the aliases `cage-egress` and `cage-gateway`. Its image's front (HAProxy, `FRONT_LABEL`)
  holds the ports sandboxes connect to and hands each connection to squid on loopback with a PROXY
  protocol header naming the sandbox's address, retrying while a reconfigure has squid's own
  ports closed: a reconfigure for one box never refuses another box's connection. A proxy made
  from an image without the front (an older Cage's, kept while boxes use it) gets squid's own
  ports in its configuration, as before.
* Order, so that a box never reaches anything its policy does not allow: `attach` creates the
  network (the box's container is created on it next); `join`, made while the box starts, rewrites
  the proxy's configuration to name the network, waits until squid has taken it, and only then
  connects the proxy to it. Until then the box is alone on a network with no route out; from the
  connect on, squid already applies its policy, so a subnet reused from a removed network never
  meets that network's stale rules.
* The proxy's configuration is rendered from the engine's state, not from this process's memory:
  every sandbox network carries its policy and gateway in labels, so two Cage processes sharing one
  engine converge on the same config. Rendering, writing and `SIGHUP` (squid reconfigures) happen
  under a lock the proxy's container holds (`proxylock`), so processes that share no directory
  (another data dir, another user, a replica in a container) still rewrite it one at a time, and
  the render is checked to name this process's network.
* A box that publishes no ports gets no network at all where this process can serve it
  (`box_front`): it runs on `none`, its policy and gateway in its own labels (`cage.egress=box`),
  squid knows it by `netns.box_address` (rendered with the networks, `_clients`), and this process
  serves its loopback from inside its namespace (`serve`, `netns.NamespaceRelay`) once squid has
  its policy (`open_box`), through the front's abstract sockets in the proxy's own network
  namespace (`_front_namespace`), until it goes (`close_box`).
* Denials: a daemon thread follows the proxy's stdout and feeds `EgressDenials`.
* A box that publishes ports gets a relay container on the outside and on its network
  (`orchestrator.sandbox.docker.ports`); removing the network removes the relay first.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import docker.errors
import docker.types
import structlog
from anyio import to_thread

from orchestrator.errors import SandboxError
from orchestrator.overlap import at_once
from orchestrator.sandbox.backend import PortBinding
from orchestrator.sandbox.docker.errors import engine_errors
from orchestrator.sandbox.docker.netns import (
    BOX_PREFIX,
    NamespaceRelay,
    box_address,
    box_namespace,
    namespaces_supported,
)
from orchestrator.sandbox.docker.ports import create_relay, relay_name, remove_relay, start_relay
from orchestrator.sandbox.docker.proxy import BOX, EGRESS_LABEL, EgressProxy
from orchestrator.sandbox.docker.timestamps import engine_age
from orchestrator.sandbox.egress.denials import EgressDenials
from orchestrator.sandbox.egress.squid import EgressClient, render
from orchestrator.sandbox.network import GATEWAY_ALIAS, PROXY_ALIAS, PROXY_PORT, EgressPolicy
from orchestrator.settings import Settings

log = structlog.get_logger(__name__)

POLICY_LABEL = "cage.egress.policy"
GATEWAY_LABEL = "cage.egress.gateway"
SANDBOX_LABEL = "cage.egress.sandbox"
NETWORK_SUFFIX = "-net"
SUBNET_PREFIX = 28
BOXES_LABEL = "cage.egress.boxes"
"""On the proxy image: `abns` when its front takes boxes with no interface on abstract Unix
sockets in its network namespace (`orchestrator.sandbox.docker.netns.SOCKETS`)."""
_CREATE_TRIES = 8
POKE_SECONDS = 0.25
"""Time bound of `_poke`'s connection to the proxy (beyond it, `settle` waits its own time)."""


SWEEP_MIN_AGE = 600.0
"""Seconds a sandbox network must exist before a sweep may take it for an orphan: a box's network is
made just before its container, so a younger one may belong to a box being created."""


def network_name(sandbox: str) -> str:
    """The network of sandbox `sandbox` (container names are unique, so network names are)."""
    return f"{sandbox}{NETWORK_SUFFIX}"


def _client(name: str, source: str, labels: Mapping[str, str]) -> EgressClient:
    """The proxy's client `name` (a network, a box) with the policy and gateway its labels carry."""
    try:
        policy = EgressPolicy.from_key(labels.get(POLICY_LABEL, ""))
    except ValueError:
        policy = EgressPolicy(mode="none")  # unreadable: the safe reading
    gateway = labels.get(GATEWAY_LABEL) or None
    return EgressClient(name=name, sources=(source,), policy=policy, gateway=gateway)


@dataclass(frozen=True)
class _Join:
    """A network `attach` made that the proxy has yet to take and join (`join`)."""

    proxy: str
    network: str


class DockerEgress:
    """Creates and removes sandbox networks and keeps the shared proxy configured for them."""

    def __init__(self, api: Callable[[], Any], settings: Settings) -> None:
        self._api = api
        self._settings = settings
        self.proxy = EgressProxy(api, settings)
        self.denials = EgressDenials(resolve=self._network_of, poke=self._poke)
        self._proxy_ip: str | None = None
        """The proxy's address on `egress_network`, as `_poke` last reached it."""
        self._lock = anyio.Lock()
        self._joins: dict[str, _Join] = {}
        """Sandbox -> its network made by `attach` that the proxy has yet to take (`join`, `detach`)."""
        self._follower: threading.Thread | None = None
        self._pool = settings.egress_subnet_pool
        self._relay = NamespaceRelay(self._front_namespace)
        self._front: tuple[str, bool] | None = None
        """(proxy id, whether its front takes boxes with no interface) as `box_front` found them."""
        self._front_lock = threading.Lock()
        self._front_namespace_fd: int | None = None
        """A descriptor of the proxy's network namespace, as `_front_namespace` last found it."""
        self._front_retired: list[int] = []
        """Descriptors of namespaces the proxy left (a connection may still be entering one: they
        are closed with this object, not before)."""

    # --- public ------------------------------------------------------------------------------

    async def attach(
        self,
        sandbox: str,
        policy: EgressPolicy,
        *,
        gateway: str | None,
        labels: Mapping[str, str] | None = None,
    ) -> str:
        """Create `sandbox`'s network, labelled with its policy and gateway; the network name.

        `labels`: the box's own labels, which its network carries too (under the network's own), so
        whatever finds a box by label finds its network: a `cage run`'s id, an operator's
        `CAGE_SANDBOX_LABELS`, a test run's label.

        `gateway` is `host:port` of the model gateway as the proxy reaches it (None: no relay).
        The proxy takes the policy and joins the network in `join`, as the box starts (module
        docstring: the order).

        Raises:
            SandboxError: the engine refused (no free subnet, the proxy failed to start).
            ConfigError: the egress settings are unusable.
        """
        made: dict[str, str] = {}

        async def proxy_up() -> None:
            made["proxy"] = await self.proxy.up()

        async def network() -> None:
            async with self._lock:  # this process's creators pick free subnets one at a time
                made["network"], made["subnet"] = await to_thread.run_sync(
                    self._create_network, sandbox, policy, gateway, labels or {}
                )

        try:
            await at_once(proxy_up, network)  # the network needs no proxy until `join`
        except BaseException:
            if "network" in made:
                with anyio.CancelScope(shield=True):
                    await to_thread.run_sync(self._remove_network, made["network"])
            raise
        name, subnet = made["network"], made["subnet"]
        self._joins[sandbox] = _Join(proxy=made["proxy"], network=name)
        self.denials.track(sandbox, subnet, policy.mode)
        self._start_follower()
        log.info("egress.attached", sandbox=sandbox, network=name, subnet=subnet, policy=policy.mode)
        return name

    async def box_front(self) -> bool:
        """Whether this process can serve boxes with no interface (`orchestrator.sandbox.docker.netns`),
        with the proxy up: `Settings.namespace_egress` on, root, the engine on this host, and a
        proxy whose front takes them (one made from an older image, kept while boxes use it, does
        not) and whose namespace this process can enter.

        Raises:
            SandboxError: the proxy failed to start.
        """
        if not self._settings.namespace_egress or not namespaces_supported():
            return False
        host = self._settings.docker_host or os.environ.get("DOCKER_HOST", "")
        if host and not host.startswith("unix://"):
            return False
        proxy = await self.proxy.up()
        if self._front is None or self._front[0] != proxy:
            self._front = (proxy, await to_thread.run_sync(self._takes_boxes, proxy))
        return self._front[1]

    def _takes_boxes(self, proxy: str) -> bool:
        labels = (self._api().inspect_container(proxy).get("Config") or {}).get("Labels") or {}
        if labels.get(BOXES_LABEL) != "abns":
            return False
        try:
            self._front_namespace(None)
        except (OSError, SandboxError) as exc:  # not this host's engine after all, say
            log.warning("egress.front_unreachable", error=str(exc))
            return False
        return True

    def _front_namespace(self, stale: int | None) -> int:
        """A descriptor of the proxy's network namespace, found anew when `stale` is the current
        one (a connection failed in it: the proxy started again). Any thread.

        Raises:
            OSError: the proxy's process cannot be checked or its namespace entered.
            SandboxError: the proxy is not running.
        """
        with self._front_lock:
            current = self._front_namespace_fd
            if current is not None and current != stale:
                return current
            if current is not None:  # stale: the proxy started again, perhaps under the same pid
                self._front_retired.append(current)
                self._front_namespace_fd = None
            name = self._settings.egress_container
            with engine_errors(name):
                data = self._api().inspect_container(name)
            pid = int((data.get("State") or {}).get("Pid") or 0)
            if pid <= 0:
                raise SandboxError(name, "the egress proxy is not running")
            self._front_namespace_fd = box_namespace(pid, str(data["Id"]))
            return self._front_namespace_fd

    async def admit(self, sandbox: str, container_id: str, policy: EgressPolicy) -> None:
        """Attribute denials of box `sandbox` (no interface, engine id `container_id`) to it."""
        self.denials.track(sandbox, f"{box_address(container_id)}/128", policy.mode)
        self._start_follower()

    async def open_box(self, sandbox: str) -> None:
        """Put box `sandbox`'s policy (its labels) in the proxy's configuration and wait until squid
        has taken it: made while the box starts, before anything serves its way out (`serve`)."""
        await to_thread.run_sync(self._reconfigure, self._settings.egress_container, sandbox)

    async def serve(self, container_id: str) -> None:
        """Serve the running box `container_id`'s way out from inside its namespace (again, after a
        start: its namespace is new).

        Raises:
            SandboxError: this process cannot serve such boxes (`box_front`), the box is not
                running, its namespace cannot be entered, or it holds the port its way out is
                served on.
        """
        if not await self.box_front():
            raise SandboxError(container_id[:12], "its way out cannot be served from this process")

        def place() -> None:
            with engine_errors(container_id[:12]):
                state = self._api().inspect_container(container_id).get("State") or {}
            pid = int(state.get("Pid") or 0)
            if not state.get("Running") or pid <= 0:
                raise SandboxError(container_id[:12], "the box is not running")
            if not self._relay.placed(container_id, pid):
                self._relay.place(container_id, pid)

        await to_thread.run_sync(place)

    def serving(self, container_id: str) -> bool:
        """Whether box `container_id`'s way out is served as it runs now (no engine call)."""
        return self._relay.serving(container_id)

    def served(self) -> list[str]:
        """The ids of the boxes with no interface this process serves the way out of now."""
        return self._relay.served()

    async def aclose(self) -> None:
        """Stop serving every box with no interface this process serves (its connections cut)."""
        await to_thread.run_sync(self._relay.close)
        with self._front_lock:
            current = [self._front_namespace_fd] if self._front_namespace_fd is not None else []
            for namespace in [*current, *self._front_retired]:
                os.close(namespace)
            self._front_namespace_fd, self._front_retired, self._front = None, [], None

    async def close_box(self, sandbox: str, container_id: str) -> None:
        """Stop serving box `sandbox`'s way out (its open connections cut): made before it goes."""
        self.denials.forget(sandbox)
        await to_thread.run_sync(self._relay.remove, container_id)

    async def join(self, sandbox: str) -> None:
        """Put `sandbox`'s policy in the proxy's configuration, then connect the proxy to its network:
        from then on the box reaches what its policy allows (and nothing before).

        For a network `attach` made here, both; for any other (a box this process did not create,
        started again), only when the proxy is missing from it. A sandbox without a network of its
        own needs nothing.

        Raises:
            SandboxError: the engine refused, or the network vanished meanwhile.
        """
        pending = self._joins.pop(sandbox, None)
        if pending is None:
            await to_thread.run_sync(self._join_if_missing, network_name(sandbox))
            return
        await to_thread.run_sync(self._reconfigure, pending.proxy, pending.network)
        await to_thread.run_sync(self._connect, pending.proxy, pending.network)

    async def publish(self, sandbox: str, network: str, ports: tuple[PortBinding, ...]) -> None:
        """Publish `sandbox`'s ports on 127.0.0.1 through a relay on its network `network`.

        Raises:
            SandboxError: the engine refused (a fixed `host_port` already taken).
        """
        image = await self.proxy.image_tag()
        labels = {"cage.managed": "true", EGRESS_LABEL: "ports", SANDBOX_LABEL: sandbox}
        await to_thread.run_sync(
            functools.partial(
                create_relay,
                self._api(),
                self._settings,
                image=image,
                sandbox=sandbox,
                network=network,
                ports=ports,
                labels=labels,
            )
        )
        log.info("egress.ports.published", sandbox=sandbox, ports=[p.container_port for p in ports])

    async def resume(self, sandbox: str) -> None:
        """Start `sandbox`'s port relay again if it has one (its box is being started)."""
        await to_thread.run_sync(start_relay, self._api(), sandbox)

    async def leave(self, sandbox: str) -> None:
        """The proxy and the port relay leave `sandbox`'s network: the box has no way out left.

        Made while the box is being removed (`detach(left=True)` removes the network once it is
        gone). Never raises for the engine: what it could not do, `detach` does again.
        """
        self._joins.pop(sandbox, None)
        try:
            await to_thread.run_sync(self._leave, network_name(sandbox))
        except SandboxError as exc:
            log.warning("egress.leave_failed", sandbox=sandbox, error=str(exc))

    async def detach(self, sandbox: str, *, left: bool = False) -> None:
        """Remove `sandbox`'s network (after its container is gone); a missing network is fine.

        `left`: `leave` has already been made. Never raises for the engine: a network it refuses
        to remove now is left to `sweep`.
        """
        self.denials.forget(sandbox)
        self._joins.pop(sandbox, None)
        try:
            remove = functools.partial(self._remove_network, network_name(sandbox), left=left)
            await to_thread.run_sync(remove)
        except SandboxError as exc:
            log.warning("egress.detach_failed", sandbox=sandbox, error=str(exc))

    async def sweep(self) -> list[str]:
        """Remove sandbox networks and port relays whose sandbox container is gone (removed behind
        Cage's back)."""
        return await to_thread.run_sync(self._sweep)

    # --- networks ------------------------------------------------------------------------------

    def _used_subnets(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        used = []
        for net in self._api().networks():
            for cfg in (net.get("IPAM") or {}).get("Config") or []:
                if cfg.get("Subnet"):
                    used.append(ipaddress.ip_network(cfg["Subnet"], strict=False))
        return used

    def _free_subnets(self) -> Iterator[str]:
        used = [u for u in self._used_subnets() if isinstance(u, ipaddress.IPv4Network)]
        for candidate in self._pool.subnets(new_prefix=SUBNET_PREFIX):
            if not any(candidate.overlaps(u) for u in used):
                yield str(candidate)

    def _create_network(
        self, sandbox: str, policy: EgressPolicy, gateway: str | None, box_labels: Mapping[str, str]
    ) -> tuple[str, str]:
        api = self._api()
        name = network_name(sandbox)
        labels = {
            **box_labels,
            "cage.managed": "true",
            EGRESS_LABEL: "network",
            SANDBOX_LABEL: sandbox,
            POLICY_LABEL: policy.key(),
            **({GATEWAY_LABEL: gateway} if gateway else {}),
        }
        with engine_errors(name):
            try:
                existing = api.inspect_network(name)
            except docker.errors.NotFound:
                existing = None
            if existing is not None:  # a leftover of a box removed behind Cage's back
                self._remove_network(name)
            last: Exception | None = None
            for tries, subnet in enumerate(self._free_subnets()):
                if tries >= _CREATE_TRIES:
                    break
                ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=subnet)])
                try:
                    api.create_network(
                        name,
                        driver="bridge",
                        internal=True,
                        ipam=ipam,
                        labels=labels,
                        options={
                            "com.docker.network.bridge.inhibit_ipv4": "true",
                            "com.docker.network.bridge.enable_ip_masquerade": "false",
                        },
                    )
                    return name, subnet
                except docker.errors.APIError as exc:  # a concurrent creator took it: try the next one
                    if "overlap" not in str(exc).lower():
                        raise
                    last = exc
        raise SandboxError(sandbox, f"no free subnet left in {self._pool} for its network ({last})")

    def _connect(self, proxy: str, network: str) -> None:
        with engine_errors(network):
            self._api().connect_container_to_network(proxy, network, aliases=[PROXY_ALIAS, GATEWAY_ALIAS])

    def _join_if_missing(self, network: str) -> None:
        """Join the proxy to `network` if it exists without it (its box's create was cut short
        before the join), rewriting the configuration first, so the join meets the box's policy."""
        api = self._api()
        proxy = self._settings.egress_container
        with engine_errors(network):
            try:
                members = api.inspect_network(network).get("Containers") or {}
            except docker.errors.NotFound:
                return
        if any(member.get("Name") == proxy for member in members.values()):
            return
        self._reconfigure(proxy, network)
        self._connect(proxy, network)

    def _leave(self, name: str) -> None:
        """The port relay (its endpoint would keep the network) and the proxy off network `name`."""
        api = self._api()
        with engine_errors(name):
            remove_relay(api, name.removesuffix(NETWORK_SUFFIX))
            with contextlib.suppress(docker.errors.APIError):  # not connected, or the network is gone
                api.disconnect_container_from_network(self._settings.egress_container, name, force=True)

    def _remove_network(self, name: str, *, left: bool = False) -> None:
        """Remove network `name`, the proxy and relay taken off it first unless `left`; another
        Cage proxy still on it (`_other_proxies`) is taken off when the engine names an endpoint."""
        api = self._api()
        if not left:
            self._leave(name)
        with engine_errors(name):
            try:
                api.remove_network(name)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                if "active endpoints" not in str(exc):
                    raise
            for proxy in [self._settings.egress_container, *self._other_proxies(name)]:
                with contextlib.suppress(docker.errors.APIError):
                    api.disconnect_container_from_network(proxy, name, force=True)
            try:
                api.remove_network(name)
            except docker.errors.NotFound:
                return

    def _other_proxies(self, network: str) -> list[str]:
        """Cage egress proxies other than ours still on `network` (another Cage process on this
        engine with its own `CAGE_EGRESS_CONTAINER` adopted it): their endpoints keep it alive.
        Only containers labelled as Cage proxies are ever disconnected."""
        api = self._api()
        try:
            attached = api.inspect_network(network).get("Containers") or {}
        except docker.errors.NotFound:
            return []
        proxies: list[str] = []
        for container_id in attached:
            try:
                labels = api.inspect_container(container_id)["Config"].get("Labels") or {}
            except docker.errors.NotFound:
                continue
            if labels.get(EGRESS_LABEL) == "proxy":
                proxies.append(container_id)
        return proxies

    def _made_networks(self) -> Iterator[tuple[dict[str, Any], dict[str, str], str]]:
        """Every network `attach` made on the engine: (engine row, labels, its sandbox's name). A
        network labelled as a sandbox's that names no box is another tool's or a hand-made one:
        neither the proxy's to serve nor the sweep's to remove."""
        for net in self._api().networks(filters={"label": f"{EGRESS_LABEL}=network"}):
            labels = net.get("Labels") or {}
            sandbox = labels.get(SANDBOX_LABEL, "")
            if sandbox:
                yield net, labels, sandbox

    def _boxes(self) -> list[EgressClient]:
        """Every box with no interface on the engine, as the proxy knows it (`box_address`)."""
        boxes: list[EgressClient] = []
        for row in self._api().containers(all=True, filters={"label": f"{EGRESS_LABEL}={BOX}"}):
            names = row.get("Names") or []
            if names:
                source = f"{box_address(str(row['Id']))}/128"
                boxes.append(_client(str(names[0]).lstrip("/"), source, row.get("Labels") or {}))
        return boxes

    def _clients(self) -> list[EgressClient]:
        """Every isolated sandbox the proxy serves: the networks and the boxes with no interface."""
        return [*self._sandbox_nets(), *self._boxes()]

    def _sandbox_nets(self) -> list[EgressClient]:
        nets: list[EgressClient] = []
        for net, labels, _sandbox in self._made_networks():
            configs = (net.get("IPAM") or {}).get("Config") or []
            if configs and configs[0].get("Subnet"):
                nets.append(_client(str(net["Name"]), str(configs[0]["Subnet"]), labels))
        return nets

    def _network_of(self, client: str) -> tuple[str, str, str] | None:
        """`(sandbox, subnet, mode)` of the sandbox network holding `client` (follower thread)."""
        ip = ipaddress.ip_address(client)
        try:
            clients = self._boxes() if ip in BOX_PREFIX else self._sandbox_nets()
        except (docker.errors.DockerException, OSError):  # the engine is away: try with the next line
            return None
        for net in clients:
            if ip in ipaddress.ip_network(net.sources[0]):
                return net.name.removesuffix(NETWORK_SUFFIX), net.sources[0], net.policy.mode
        return None

    def _sweep(self) -> list[str]:
        api = self._api()
        removed: list[str] = []
        for container_id in self._relay.served():  # boxes removed behind Cage's back
            try:
                running = (api.inspect_container(container_id).get("State") or {}).get("Running")
            except docker.errors.NotFound:
                running = False
            if not running:
                self._relay.remove(container_id)
        with engine_errors("egress networks"):
            for net, _labels, sandbox in self._made_networks():
                if engine_age(net.get("Created")) < SWEEP_MIN_AGE:
                    continue  # made for a box that is being created right now
                try:
                    api.inspect_container(sandbox)
                    continue
                except docker.errors.NotFound:
                    pass
                self._remove_network(str(net["Name"]))
                removed.append(str(net["Name"]))
            for relay in api.containers(all=True, filters={"label": f"{EGRESS_LABEL}=ports"}):
                sandbox = (relay.get("Labels") or {}).get(SANDBOX_LABEL, "")
                if not sandbox:
                    continue
                try:
                    api.inspect_container(sandbox)
                    continue
                except docker.errors.NotFound:
                    pass
                remove_relay(api, sandbox)  # its network went first, somehow: the relay alone
                removed.append(relay_name(sandbox))
        return removed

    # --- configuration ---------------------------------------------------------------------------

    def _reconfigure(self, proxy: str, client: str) -> None:
        """Put every isolated sandbox's policy (`client`'s among them: a network, or a box with no
        interface) in the proxy's configuration, rendered from the engine's state under the proxy's
        lock, and return once squid has taken it (`EgressProxy.rewrite`).

        Raises:
            SandboxError: `client` vanished, or squid did not take the configuration in time.
        """

        def render_all(front: bool) -> str:
            text = render(self._clients(), never=(str(self._pool), str(BOX_PREFIX)), front=front)
            if f"# {client}:" not in text:
                raise SandboxError(client, "the sandbox vanished before the proxy was configured")
            return text

        self.proxy.rewrite(proxy, render_all)
        log.debug("egress.reconfigured", client=client)

    # --- denials -----------------------------------------------------------------------------------

    def _poke(self, host: str, port: int) -> bool:
        """Ask the proxy for `http://host:port/` on its outside address (`EgressDenials.settle`):
        refused and logged like a box's request. False when the follower is not reading the log or
        the proxy cannot be reached from here (an engine on another machine)."""
        if self._follower is None or not self._follower.is_alive():
            return False
        try:
            ip = self._proxy_ip or self.proxy.outside_ip()
            with socket.create_connection((ip, PROXY_PORT), timeout=POKE_SECONDS) as conn:
                conn.sendall(f"GET http://{host}:{port}/ HTTP/1.0\r\n\r\n".encode())
                while conn.recv(4096):  # squid logs the request as it ends it
                    pass
        except (OSError, SandboxError, docker.errors.DockerException) as exc:
            self._proxy_ip = None
            log.debug("egress.poke_failed", error=str(exc))
            return False
        self._proxy_ip = ip
        return True

    def _start_follower(self) -> None:
        if self._follower is not None and self._follower.is_alive():
            return
        self._follower = threading.Thread(target=self._follow, name="cage-egress-log", daemon=True)
        self._follower.start()

    def _follow(self) -> None:
        """Read the proxy's stdout from now on; reconnect when the stream ends while this process
        still has sandboxes behind the proxy, else end (a later attach starts a new follower). A
        proxy container that no longer exists, or is being removed, ends it at once."""
        since = int(time.time())
        while True:
            try:
                stream = self._api().logs(
                    self._settings.egress_container,
                    stdout=True,
                    stderr=False,
                    stream=True,
                    follow=True,
                    since=since,
                )
                partial = b""
                for chunk in stream:
                    lines = (partial + chunk).split(b"\n")
                    partial = lines.pop()
                    for line in lines:
                        self.denials.feed(line.decode("utf-8", errors="replace"))
                    since = int(time.time())
            except docker.errors.APIError as exc:
                # The proxy is gone (removed, or never started here: 404) or going ("dead or marked
                # for removal": 409): nothing to follow; the next sandbox attached to a proxy starts
                # a new follower. Any other refusal is a hiccup, retried below.
                if exc.status_code in (404, 409):
                    log.debug("egress.follow.gone", proxy=self._settings.egress_container)
                    return
                log.debug("egress.follow.retry", error=str(exc))
            except Exception as exc:  # noqa: BLE001 - a follower must survive any engine hiccup
                log.debug("egress.follow.retry", error=str(exc))
            if not self.denials.tracking():
                return
            time.sleep(1.0)
