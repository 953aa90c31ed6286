"""The egress proxies on Kubernetes: their squid.conf, kept from the sandbox pods that exist.

The chart runs the cage/egress squid image as the `cage-egress` Deployment (`proxy.py` holds the
same objects); a `bridge` or allowlist sandbox's NetworkPolicy lets it reach those pods on 3128
and nothing else outside. Squid tells sandboxes apart by client address, so the configuration
lists every isolated sandbox pod by its IPs (/32, /128) with that pod's policy (the
`cage.egress` annotation), rendered by the renderer the Docker proxy uses
(`orchestrator.sandbox.egress.squid`). It is kept from the cluster's state, not from this
process's memory, so every replica converges on the same text:

- a sandbox pod that needs the proxy is admitted once it runs (it has its IP) and before its first
  exec: the text is rendered, written into every proxy pod over pods/exec and squid reconfigured
  there (`WRITE_SCRIPT`: unchanged text is left alone; a text squid refuses is never installed;
  SIGHUP keeps open connections);
- a removed or stopped sandbox's pod is dropped the same way, and the leader's network sweep
  renders again (a pod gone behind Cage's back, a proxy pod that restarted with the placeholder);
- replicas take turns (a Postgres advisory lock, `use_cluster_lock`), so a render never
  overwrites a newer one.

A proxy pod is ready only once it runs a configuration Cage rendered (its readiness probe), so
the `cage-egress` Service never sends a sandbox to a proxy that still refuses everything.

Refused requests: `denials` (an `EgressDenials`) is fed from the proxy pods' logs
(`proxy_logs.ProxyLogFollower`) and attributes a client IP to the sandbox that has it in the last
render this process saw, for the sandboxes it admitted and those a turn of it watches.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import structlog

from orchestrator.errors import SandboxError
from orchestrator.sandbox.backend import ClusterLock
from orchestrator.sandbox.egress.denials import EgressDenials
from orchestrator.sandbox.egress.squid import EgressClient, render
from orchestrator.sandbox.network import EgressPolicy

log = structlog.get_logger(__name__)

EGRESS_CONTAINER = "egress"
"""The squid container of a proxy pod."""
CONF = "/run/squid/squid.conf"
"""Where a proxy pod's squid reads its configuration (an `emptyDir`: the root is read-only)."""
PLACEHOLDER = "/etc/squid/squid.conf"
"""The image's refuse-everything configuration, copied to `CONF` when the pod starts."""
PID_FILE = "/run/squid/squid.pid"
"""Where squid writes its pid (`pid_filename` in every configuration; the readiness probe reads it)."""
RENDERED_MARK = "# Rendered by Cage"
"""The first line of every rendered configuration (the readiness probe looks for it)."""
START_SCRIPT = f"rm -f {PID_FILE}; [ -e {CONF} ] || cp {PLACEHOLDER} {CONF}; exec squid -N -f {CONF}"
"""A proxy pod's command: start on Cage's configuration if it was written first, else the placeholder.
The pid file a squid killed before its shutdown left in the `emptyDir` (it outlives the container)
goes first, as `cage-egress-front` does on Docker: squid refuses to start while it names a live
process."""
READY_SCRIPT = f"grep -q '^{RENDERED_MARK}' {CONF} && [ -s {PID_FILE} ]"
WRITE_SCRIPT = f"""conf={CONF}; new="$conf.new.$$"
cat > "$new" || exit 4
if [ -f "$conf" ] && [ "$(sha256sum < "$new")" = "$(sha256sum < "$conf")" ]; then
  rm -f "$new"; echo unchanged; exit 0
fi
if ! squid -k parse -f "$new" > "$new.log" 2>&1; then
  tail -n 5 "$new.log" >&2; rm -f "$new" "$new.log"; exit 5
fi
rm -f "$new.log"; mv -f "$new" "$conf" || exit 4
if [ -s {PID_FILE} ]; then kill -s HUP "$(cat {PID_FILE})" || exit 6; fi
echo reconfigured"""
"""stdin: the new squid.conf. Exit 0 (`unchanged` or `reconfigured`), 4 not writable, 5 refused
by `squid -k parse` (the old configuration stays), 6 squid did not take the signal. SIGHUP is what
`squid -k reconfigure` sends, which refuses to signal pid 1, and squid is pid 1 of its pod."""
LOCK_KEY = "egress:{namespace}"


@dataclass(frozen=True)
class SandboxPod:
    """What the proxies' configuration needs of one isolated sandbox pod."""

    name: str
    ips: tuple[str, ...]
    """`status.podIPs` (empty until the pod is scheduled and its network is up)."""
    policy_key: str | None
    """Its `cage.egress` annotation (None: none was written)."""
    gone: bool = False
    """Terminating or terminated: its IP may be given to another pod any moment."""
    sandbox: str = ""
    """Its Cage name (the `cage.name` annotation; the pod name when it has none)."""

    @property
    def cage_name(self) -> str:
        return self.sandbox or self.name


@dataclass(frozen=True)
class ProxyPod:
    name: str
    running: bool
    """The squid container runs (a pod still pulling its image cannot be written to)."""
    ready: bool = False
    """Its readiness probe passes (it runs a rendered configuration): the Service sends to it."""


def _cidr(ip: str) -> str:
    return str(ipaddress.ip_network(ip))


def pod_policy(pod: SandboxPod) -> EgressPolicy:
    """The pod's policy; an annotation Cage cannot read is `none` (the safe reading)."""
    try:
        return EgressPolicy.from_key(pod.policy_key or "none")
    except ValueError:
        return EgressPolicy(mode="none")


def egress_clients(pods: Iterable[SandboxPod]) -> tuple[list[EgressClient], list[str]]:
    """The proxy's clients (pods whose policy goes through it) and every sandbox pod's range
    (never a destination, in any mode)."""
    clients: list[EgressClient] = []
    never: set[str] = set()
    for pod in pods:
        if pod.gone or not pod.ips:
            continue
        sources = tuple(sorted({_cidr(ip) for ip in pod.ips}))
        never.update(sources)
        policy = pod_policy(pod)
        if policy.mode != "none":
            clients.append(EgressClient(name=pod.name, sources=sources, policy=policy))
    return clients, sorted(never, key=lambda c: (ipaddress.ip_network(c).version, ipaddress.ip_network(c)))


def render_pods(pods: Iterable[SandboxPod]) -> str:
    """squid.conf for the sandbox pods `pods` (the gateway is reached directly: no relay)."""
    clients, never = egress_clients(pods)
    return render(clients, never=never, front=False)  # the chart's pods run squid alone


def needs_proxy(policy_key: str | None) -> bool:
    return pod_policy(SandboxPod(name="", ips=(), policy_key=policy_key)).mode != "none"


ListSandboxes = Callable[[], Awaitable[list[SandboxPod]]]
ListProxies = Callable[[], Awaitable[list[ProxyPod]]]
Write = Callable[[str, bytes], Awaitable[tuple[int, str]]]
"""(proxy pod, squid.conf) -> (exit code of `WRITE_SCRIPT`, its stderr tail)."""


class KubeEgress:
    """Keeps every proxy pod's squid.conf rendered from the sandbox pods (see the module doc)."""

    def __init__(
        self,
        namespace: str,
        *,
        sandboxes: ListSandboxes,
        proxies: ListProxies,
        write: Write,
        selector: str,
        ready_timeout: float = 60.0,
    ) -> None:
        self._namespace = namespace
        self._sandboxes = sandboxes
        self._proxies = proxies
        self._write = write
        self._selector = selector
        self._ready_timeout = ready_timeout
        self._lock = anyio.Lock()
        self._cluster_lock: ClusterLock | None = None
        self.denials = EgressDenials(resolve=self._resolve)
        self._clients: dict[str, tuple[str, str, str]] = {}
        """Client IP -> (Cage name, source range, mode) of the last render (read by the log follower)."""
        self._tracked: set[str] = set()
        """Cage names of the sandboxes whose denials this process reports: those it admitted and
        those a turn of it watched, while they exist (pruned at each render)."""

    def use_cluster_lock(self, lock: ClusterLock) -> None:
        self._cluster_lock = lock

    @asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        async with self._lock:
            if self._cluster_lock is None:
                yield
                return
            async with self._cluster_lock(LOCK_KEY.format(namespace=self._namespace)):
                yield

    async def admit(self, pod: str) -> None:
        """Configure every proxy pod with `pod` (running, with its IP) in it.

        Raises:
            SandboxError: no proxy pod runs (names the selector and the chart), a running proxy
                did not take the configuration, or `pod` vanished meanwhile.
        """
        async with self._turn():
            pods = await self._sandboxes()
            text = self._render(pods)
            if f"\n# {pod}: " not in text:
                raise SandboxError(pod, "the pod has no IP or is gone: no proxy can tell it apart")
            proxies = [p for p in await self._proxies() if p.running]
            if not proxies:
                raise SandboxError(
                    pod,
                    f"no egress proxy pod runs in namespace {self._namespace} (pods {self._selector}): "
                    "`bridge` and allowlist sandboxes need the chart's cage-egress Deployment",
                )
            await self._write_all(proxies, text, strict=True)
        if not any(p.ready for p in proxies):
            await self._until_ready(pod)
        for found in pods:
            if found.name == pod:
                name, source, mode = self._client_of(found)
                self._tracked.add(name)
                self.denials.track(name, source, mode)
        log.info("egress.k8s.admitted", pod=pod, proxies=len(proxies))

    async def _until_ready(self, pod: str) -> None:
        """Wait until a proxy pod is ready: the `cage-egress` Service sends to ready pods only, and
        fresh ones (a new install, all restarted) become ready once their first rendered text runs."""
        with anyio.move_on_after(self._ready_timeout):
            while not any(p.ready for p in await self._proxies()):  # noqa: ASYNC110 - the API: poll
                await anyio.sleep(0.5)
            return
        raise SandboxError(
            pod,
            f"no egress proxy pod became ready within {self._ready_timeout:.0f}s after its configuration "
            f"(pods {self._selector}: see their readiness probe)",
        )

    async def refresh(self) -> int:
        """Render from the pods as they are and write it into every running proxy pod (a sandbox
        went away, a proxy restarted); the proxies written. Never raises for a proxy: a failure
        is logged, and the next refresh tries again.

        Raises:
            SandboxError: the pods cannot be listed.
        """
        async with self._turn():
            proxies = [p for p in await self._proxies() if p.running]
            if not proxies:
                return 0
            text = self._render(await self._sandboxes())
            return await self._write_all(proxies, text, strict=False)

    def forget(self, sandbox: str) -> None:
        """`sandbox` (its Cage name) is gone: its denials are no longer this process's."""
        self._tracked.discard(sandbox)
        self.denials.forget(sandbox)

    def _render(self, pods: list[SandboxPod]) -> str:
        """The text for `pods`; remembers their addresses for the log follower."""
        clients: dict[str, tuple[str, str, str]] = {}
        for pod in pods:
            if not pod.gone and pod.ips and needs_proxy(pod.policy_key):
                name, _, mode = self._client_of(pod)
                for ip in pod.ips:
                    clients[str(ipaddress.ip_address(ip))] = (name, _cidr(ip), mode)
        alive = {name for name, _, _ in clients.values()}
        for name in set(self._tracked) - alive:
            self.forget(name)
        self._clients = clients
        return render_pods(pods)

    @staticmethod
    def _client_of(pod: SandboxPod) -> tuple[str, str, str]:
        return pod.cage_name, _cidr(pod.ips[0]), pod_policy(pod).mode

    def _resolve(self, client: str) -> tuple[str, str, str] | None:
        """A client address of the last render, if its sandbox is this process's to report
        (called from the log follower's thread)."""
        found = self._clients.get(client)
        if found is None or not (found[0] in self._tracked or self.denials.watched(found[0])):
            return None
        self._tracked.add(found[0])  # EgressDenials tracks it from now on: pruned with it
        return found

    async def _write_all(self, proxies: Sequence[ProxyPod], text: str, *, strict: bool) -> int:
        data = text.encode()
        failed: list[str] = []
        done = 0
        for proxy in proxies:
            try:
                code, stderr = await self._write(proxy.name, data)
            except SandboxError as exc:  # it went away meanwhile, or the API refused the exec
                code, stderr = -1, str(exc)
            if code == 0:
                done += 1
                continue
            log.warning("egress.k8s.write_failed", proxy=proxy.name, code=code, stderr=stderr[-300:])
            failed.append(f"{proxy.name} (exit {code}: {stderr.strip()[-200:]})")
        if strict and failed:  # the Service may send the sandbox to any of them
            raise SandboxError("cage-egress", f"proxies refused the configuration: {'; '.join(failed)}")
        return done
