"""Refused connections: parsed from the proxy's access log and handed to the turn of their sandbox.

The proxy logs every request in `squid.DENIAL_FORMAT`; a follower (the Docker one reads the
egress container's stdout, the Kubernetes one every proxy pod's log) feeds each line to
`EgressDenials.feed`, which keeps the `TCP_DENIED` ones, finds the sandbox by client subnet and
passes a `Denial` to that sandbox's subscribers (the running turn puts it on its stream as
`sandbox/egress_denied`). The follower runs in a
thread of its own, so subscribers receive through their event loop's token.

`settle` waits until the follower has read the log up to now: the engine's egress pokes the proxy
with a request of its own (`poke`: refused and logged like any other, under a host and port drawn
for the occasion), and the follower's reading that line proves every earlier line was fed. Without
a way to poke, it waits the time it is given.
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio
import structlog
from anyio import to_thread
from anyio.from_thread import run_sync as run_in_loop
from anyio.lowlevel import EventLoopToken, current_token
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

log = structlog.get_logger(__name__)
_DENIED = "TCP_DENIED"
_BUFFER = 256
"""Denials a subscriber may fall behind by; more are dropped (and counted), never block the proxy log."""


@dataclass(frozen=True)
class Denial:
    """One refused request: which sandbox asked for what."""

    sandbox: str
    host: str
    port: int | None
    method: str


def parse_line(line: str) -> tuple[str, str, int | None, str] | None:
    """`(client_ip, host, port, method)` of a `TCP_DENIED` access log line, else None."""
    parts = line.split()
    if len(parts) < 7 or not parts[2].startswith(_DENIED):
        return None
    _time, client, _status, _code, method, host, port = parts[:7]
    try:
        ipaddress.ip_address(client)
    except ValueError:
        return None
    return client, host, int(port) if port.isdigit() else None, method


@dataclass
class _Subscriber:
    send: MemoryObjectSendStream[Denial]
    token: EventLoopToken


@dataclass
class _Barrier:
    reached: anyio.Event
    token: EventLoopToken


Poke = Callable[[str, int], bool]
"""Ask the proxy for `http://<host>:<port>/` (refused and logged); False when it cannot be reached."""


class EgressDenials:
    """Maps client subnets to sandboxes and fans denials out to subscribers; counts them all."""

    def __init__(
        self, resolve: Callable[[str], tuple[str, str, str] | None] | None = None, poke: Poke | None = None
    ) -> None:
        self._resolve = resolve
        """Finds `(sandbox, subnet, mode)` for a client this process did not attach (a box adopted
        after a restart); called from the follower thread, its answer is remembered."""
        self._poke = poke
        """Makes the proxy log a line `settle` waits for (blocking; None: `settle` waits its time)."""
        self._barriers: dict[tuple[str, int], _Barrier] = {}
        self._lock = threading.Lock()
        self._subnets: dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network] = {}
        self._subscribers: dict[str, list[_Subscriber]] = {}
        self.counts: Counter[str] = Counter()
        """Denials seen by this process, by the refused sandbox's policy mode (`none`, `bridge`, `allow`)."""
        self._modes: dict[str, str] = {}

    def track(self, sandbox: str, subnet: str, mode: str) -> None:
        """Attribute denials from `subnet` to `sandbox` (its network was attached by this process)."""
        with self._lock:
            self._subnets[sandbox] = ipaddress.ip_network(subnet)
            self._modes[sandbox] = mode

    def forget(self, sandbox: str) -> None:
        with self._lock:
            self._subnets.pop(sandbox, None)
            self._modes.pop(sandbox, None)

    def tracking(self) -> bool:
        """Whether any sandbox of this process is behind the proxy."""
        with self._lock:
            return bool(self._subnets)

    def watched(self, sandbox: str) -> bool:
        """Whether a turn of this process subscribes to `sandbox`'s denials now."""
        with self._lock:
            return bool(self._subscribers.get(sandbox))

    def sandbox_of(self, client: str) -> str | None:
        ip = ipaddress.ip_address(client)
        with self._lock:
            for sandbox, net in self._subnets.items():
                if ip in net:
                    return sandbox
        return None

    def feed(self, line: str) -> Denial | None:
        """One access log line (called from the follower thread)."""
        parsed = parse_line(line)
        if parsed is None:
            return None
        client, host, port, method = parsed
        with self._lock:
            barrier = self._barriers.pop((host, port), None) if port is not None else None
        if barrier is not None:  # `settle`'s own request: every line before it has been fed
            with contextlib.suppress(RuntimeError):  # that event loop is gone
                run_in_loop(barrier.reached.set, token=barrier.token)
            return None
        sandbox = self.sandbox_of(client)
        if sandbox is None and self._resolve is not None:
            found = self._resolve(client)
            if found is not None:
                sandbox, subnet, mode = found
                self.track(sandbox, subnet, mode)
        if sandbox is None:
            return None  # not a sandbox network Cage knows
        denial = Denial(sandbox=sandbox, host=host, port=port, method=method)
        with self._lock:
            self.counts[self._modes.get(sandbox, "unknown")] += 1
            subscribers = list(self._subscribers.get(sandbox, ()))
        log.info("egress.denied", sandbox=sandbox, host=host, port=port, method=method)
        for sub in subscribers:
            try:
                run_in_loop(_offer, sub.send, denial, token=sub.token)
            except RuntimeError:  # that event loop is gone: the subscription is dead
                continue
        return denial

    async def settle(self, within: float) -> None:
        """Return once every line the proxy logged before now has been fed (each denial handed to
        its turn), or after `within` seconds: always then when the proxy cannot be poked."""
        with anyio.move_on_after(within):
            if self._poke is None:
                await anyio.sleep(within)
                return
            # a loopback address and a port nobody asks for: refused by every policy, before any
            # name lookup, and told apart from the boxes' requests by the pair drawn here
            host = "127." + ".".join(str(secrets.randbelow(256)) for _ in range(3))
            port = 1024 + secrets.randbelow(65536 - 1024)
            barrier = _Barrier(reached=anyio.Event(), token=current_token())
            with self._lock:
                self._barriers[(host, port)] = barrier
            try:
                if await to_thread.run_sync(self._poke, host, port, abandon_on_cancel=True):
                    await barrier.reached.wait()
                else:
                    await anyio.sleep(within)
            finally:
                with self._lock:
                    self._barriers.pop((host, port), None)

    @contextmanager
    def subscribe(self, sandbox: str) -> Iterator[MemoryObjectReceiveStream[Denial]]:
        """Denials of `sandbox` while the block runs (call from async code: it binds the event loop)."""
        send, receive = anyio.create_memory_object_stream[Denial](_BUFFER)
        sub = _Subscriber(send=send, token=current_token())
        with self._lock:
            self._subscribers.setdefault(sandbox, []).append(sub)
        try:
            yield receive
        finally:
            with self._lock:
                subs = self._subscribers.get(sandbox, [])
                if sub in subs:
                    subs.remove(sub)
                if not subs:
                    self._subscribers.pop(sandbox, None)
            send.close()
            receive.close()


def _offer(send: MemoryObjectSendStream[Denial], denial: Denial) -> None:
    try:
        send.send_nowait(denial)
    except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
        log.warning("egress.denial_dropped", sandbox=denial.sandbox, host=denial.host)


def backend_denials(backend: object) -> EgressDenials | None:
    """A backend's denial hub, when its engine has an egress proxy (Docker's and Kubernetes' do)."""
    hub = getattr(getattr(backend, "egress", None), "denials", None)
    return hub if isinstance(hub, EgressDenials) else None
