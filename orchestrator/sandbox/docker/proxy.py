"""The shared egress proxy's container on the Docker engine: made from its image, started, heard
listening, and its configuration rewritten (`EgressProxy`).

One container (`Settings.egress_container`, squid behind HAProxy's front, `images/egress/`) serves
the isolated sandboxes of every Cage process on the engine. It is made on first use, labelled with
a digest of what it is made with, and made again when that changes while no sandbox is behind it
(kept, with a warning, while some are). squid says in its log when it listens, after a start or a
`SIGHUP`: Cage waits for that line before it counts on a configuration. What the configuration
holds is `orchestrator.sandbox.docker.egress`'s to render.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import anyio
import docker.errors
import structlog
from anyio import to_thread

from orchestrator.errors import SandboxError
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.docker.errors import engine_errors
from orchestrator.sandbox.docker.proxylock import config_lock
from orchestrator.sandbox.docker.timestamps import engine_time
from orchestrator.sandbox.images import EGRESS_IMAGE
from orchestrator.settings import Settings

log = structlog.get_logger(__name__)

EGRESS_LABEL = "cage.egress"
"""What a container or network is to the egress system: `proxy` (this container), `network` (a
sandbox's network), `box` (`BOX`), `ports` (a box's port relay)."""
BOX = "box"
"""`EGRESS_LABEL` of a box with no interface (its policy and gateway in its own labels)."""
CONFIG_LABEL = "cage.egress.config"
"""On the proxy container: a digest of what it was created with (image, outside network, hosts)."""
SQUID_CONF = "/etc/squid/squid.conf"
"""Where squid reads its configuration in a proxy without the front."""
FRONT_CONF = "/etc/squid/front.conf"
"""Where squid reads it behind the front (`images/egress/cage-egress-front`)."""
FRONT_LABEL = "cage.egress.front"
"""On the proxy image (so on its container): `true` when HAProxy fronts squid."""
PROXY_START_SECONDS = 30.0
"""How long a just-started proxy may take to listen (squid reads its configuration first)."""
LISTENING = b"Accepting reverse-proxy HTTP Socket connections"
"""What squid logs (to stderr) once its (re)configuration is in force: the last of its ports opened
(the relay's), its signal handlers set before."""
RECONFIGURING = b"Reconfiguring Squid Cache"
"""What squid logs (to stderr) as it starts a reconfigure, one line each: how benches and tests
count the rewrites that reached it."""
_RECONFIGURE_POLL = 0.01
_TAIL = 200
"""Log lines read back when waiting for squid: more than it logs in a few polls on a busy engine."""
_SAID = 20
"""Lines of squid's log put in the server's log when it does not answer in time."""
_HOST_ALIAS = "host.docker.internal"


def _stamped(log: bytes) -> list[tuple[datetime, bytes]]:
    """The lines of a log read with `timestamps=True`: (the engine's time, the text), oldest first."""
    lines = []
    for line in log.splitlines():
        stamp, _, text = line.partition(b" ")
        when = engine_time(stamp.decode(errors="replace"))
        if when is not None:
            lines.append((when, text))
    return lines


class EgressProxy:
    """The proxy container of `Settings.egress_container`, as one process sees it."""

    def __init__(self, api: Callable[[], Any], settings: Settings) -> None:
        self._api = api
        self._settings = settings
        self._image: str | None = None
        """The proxy image's tag once ensured: content-addressed, so it is looked up once per process
        (the lookup hashes its build context: ~4% of a cold acquire in bench/pool.py); forgotten
        when the proxy cannot be ensured with it."""
        self._lock = anyio.Lock()

    async def up(self) -> str:
        """The proxy's container id, created or started as needed."""
        image = await self.image_tag()
        async with self._lock:
            try:
                return await to_thread.run_sync(self._ensure, image)
            except SandboxError:
                self._image = None  # removed behind our back, say: look it up again next time
                raise

    async def image_tag(self) -> str:
        """The proxy image's tag (the port relays run it too), ensured once a process."""
        if self._image is None:
            self._image = await self._build_image()
        return self._image

    async def _build_image(self) -> str:
        """The proxy image's tag, built by the runner image builder when missing (its engine
        client closed after: this runs once a process)."""
        builder = DockerImageBuilder(self._settings)
        try:
            return (await builder.ensure_image(EGRESS_IMAGE)).tag
        finally:
            await builder.aclose()

    def _digest(self, image: str) -> str:
        """What the proxy container is made with (image, outside network, hosts), digested: a
        container with another digest is stale."""
        s = self._settings
        text = repr((image, s.egress_network, sorted(s.egress_hosts.items())))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _ensure(self, image: str) -> str:
        """The proxy's container id, created or started as needed."""
        api = self._api()
        name = self._settings.egress_container
        digest = self._digest(image)
        with engine_errors(name):
            try:
                data = api.inspect_container(name)
            except docker.errors.NotFound:
                data = None
            if data is not None:
                labels = (data.get("Config") or {}).get("Labels") or {}
                attached = set((data.get("NetworkSettings") or {}).get("Networks") or {})
                stale = labels.get(CONFIG_LABEL) != digest
                if (
                    stale
                    and attached <= {self._settings.egress_network}
                    and not api.containers(filters={"label": f"{EGRESS_LABEL}={BOX}"})  # none served
                ):
                    log.info("egress.proxy.recreate", container=name)
                    api.remove_container(name, force=True)
                    data = None
                elif stale:
                    log.warning("egress.proxy.stale", container=name, reason="sandboxes behind it")
            fresh = data is None  # made now, by this process or (a name conflict) by another
            if data is None:
                data = self._create(name, image, digest)
            if not (data.get("State") or {}).get("Running"):
                api.start(data["Id"])
                fresh = True
            if fresh:
                self.await_listening(str(data["Id"]))
        return str(data["Id"])

    def await_listening(self, proxy: str) -> None:
        """Return once squid in the proxy, just started, listens: its SIGHUP handler is set by then.

        Before, a reconfigure's SIGHUP ends squid (the default action) and the proxy with it, and
        the first boxes behind it reach nothing.

        Raises:
            SandboxError: the proxy exited, or did not listen within `PROXY_START_SECONDS`.
        """
        state = self._api().inspect_container(proxy).get("State") or {}
        self._await_listening_after(proxy, engine_time(state.get("StartedAt")), "listen")

    def _await_listening_after(self, proxy: str, mark: datetime | None, what: str) -> None:
        """Wait until squid logs that it listens, later than `mark` (None: at all).

        The last lines of the log are read (cheap at any log size) and, only when they do not
        reach back to `mark` (much logged meanwhile), the log since `mark` (which the engine reads
        from the start of its file).

        Raises:
            SandboxError: the proxy stopped, or nothing of the kind within `PROXY_START_SECONDS`
                (`what` says of what).
        """
        api = self._api()
        deadline = time.monotonic() + PROXY_START_SECONDS
        while True:
            state = api.inspect_container(proxy).get("State") or {}
            if not state.get("Running"):
                status = f"{state.get('Status')}, exit code {state.get('ExitCode')}"
                raise SandboxError(self._settings.egress_container, f"the egress proxy stopped ({status})")
            lines = _stamped(api.logs(proxy, stdout=True, stderr=True, tail=_TAIL, timestamps=True))
            if any(LISTENING in text and (mark is None or when > mark) for when, text in lines):
                return
            if mark is not None and len(lines) >= _TAIL and lines[0][0] > mark:
                since = api.logs(proxy, stdout=False, stderr=True, since=mark.timestamp(), timestamps=True)
                if any(LISTENING in text and when > mark for when, text in _stamped(since)):
                    return
            if time.monotonic() > deadline:
                # squid's own log (stderr; stdout is other boxes' requests) for the operator
                said = api.logs(proxy, stdout=False, stderr=True, tail=_SAID, timestamps=True)
                last = said.decode(errors="replace")
                log.warning("egress.proxy.silent", container=proxy, status=state.get("Status"), last=last)
                raise SandboxError(
                    self._settings.egress_container,
                    f"the egress proxy did not {what} within {PROXY_START_SECONDS:g}s",
                )
            time.sleep(_RECONFIGURE_POLL)

    def _create(self, name: str, image: str, digest: str) -> dict[str, Any]:
        api = self._api()
        s = self._settings
        hosts = {_HOST_ALIAS: "host-gateway", **s.egress_hosts}
        host_config = api.create_host_config(
            network_mode=s.egress_network,
            extra_hosts=hosts,
            restart_policy={"Name": "unless-stopped"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            mem_limit=256 * 2**20,
            pids_limit=256,
            init=True,
        )
        try:
            created = api.create_container(
                image=image,
                name=name,
                labels={"cage.managed": "true", EGRESS_LABEL: "proxy", CONFIG_LABEL: digest},
                host_config=host_config,
            )
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # another process created it meanwhile
                data: dict[str, Any] = api.inspect_container(name)
                return data
            raise
        log.info("egress.proxy.created", container=name, image=image, network=s.egress_network)
        result: dict[str, Any] = api.inspect_container(created["Id"])
        return result

    def rewrite(self, proxy: str, render: Callable[[bool], str]) -> None:
        """Write the configuration `render` makes (given whether the proxy has the front), SIGHUP
        squid and wait until squid has taken it; all of it under the proxy's own lock
        (`proxylock`), so no other process's rewrite comes between, whatever its data directory,
        user or host. `render` runs under the lock, so it reads the engine's state as it is when
        this rewrite's turn comes; when it makes the configuration squid has already taken (another
        holder's render named this caller's client too), nothing is written or signalled.

        squid re-reads its configuration after the signal, in its own time (~40 ms here, more on
        a loaded engine, its ports closed meanwhile, which the front bridges for the boxes already
        there): the caller learns that its client's policy is in force, not merely written.

        Raises:
            SandboxError: `render` refused (its client vanished), or squid did not take the
                configuration in time.
        """
        api = self._api()
        with engine_errors(self._settings.egress_container):
            labels = (api.inspect_container(proxy).get("Config") or {}).get("Labels") or {}
            front = labels.get(FRONT_LABEL) == "true"
            with config_lock(api, proxy, FRONT_CONF if front else SQUID_CONF) as held:
                text = render(front)
                if held.holds(text):
                    log.debug("egress.rewrite.skipped", reason="squid has this configuration")
                    return
                last = _stamped(api.logs(proxy, stdout=True, stderr=True, tail=1, timestamps=True))
                held.write(text)
                api.kill(proxy, signal="SIGHUP")
                self._await_listening_after(proxy, last[-1][0] if last else None, "take its configuration")
                held.confirm()

    def outside_ip(self) -> str:
        """The proxy's address on `Settings.egress_network`."""
        api = self._api()
        with engine_errors(self._settings.egress_container):
            data = api.inspect_container(self._settings.egress_container)
        networks = (data.get("NetworkSettings") or {}).get("Networks") or {}
        ip = (networks.get(self._settings.egress_network) or {}).get("IPAddress")
        if not ip:
            raise SandboxError(self._settings.egress_container, "the proxy has no outside address")
        return str(ip)
