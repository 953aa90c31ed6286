"""`ProxyLogFollower`: the egress proxy pods' logs (pods/log, `follow`) fed to `EgressDenials`.

Squid writes every request to its stdout in `squid.DENIAL_FORMAT`; the `TCP_DENIED` lines become
`sandbox/egress_denied` events of the turn whose sandbox has that client IP. As on Docker, the
follower runs in a daemon thread of its own (with its own event loop and API client: the
backend's client belongs to the server's loop), so `EgressDenials` hands each denial to its
subscribers through their loop's token. It lists the proxy pods every `relist` seconds and
follows each running one; a stream that ends (the pod went, the API server closed it) is
followed again from the last second it delivered. `stop()` ends it (the backend's `aclose`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import structlog

from orchestrator.sandbox.egress.denials import EgressDenials

log = structlog.get_logger(__name__)


class ProxyLogFollower:
    """Follows the logs of the pods `selector` names in `namespace` into `denials`."""

    def __init__(
        self,
        denials: EgressDenials,
        *,
        open_client: Callable[[], Any],
        namespace: str,
        selector: str,
        container: str,
        relist: float = 15.0,
    ) -> None:
        self._denials = denials
        self._open_client = open_client
        """A new `ApiClient`, called in the follower's own event loop."""
        self._namespace = namespace
        self._selector = selector
        self._container = container
        self._relist = relist
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._last: dict[str, float] = {}
        """Proxy pod -> wall time of the last line read from it."""

    def start(self) -> None:
        """Start following (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="cage-egress-k8s-log", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the follower and wait for its thread up to `timeout` seconds (blocking)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            anyio.run(self._main, backend="asyncio")  # aiohttp, the client's transport, needs asyncio
        except Exception as exc:  # noqa: BLE001 - a daemon thread: say why it ended, never raise
            log.warning("egress.k8s.follow_ended", error=f"{type(exc).__name__}: {exc}")

    async def _main(self) -> None:
        from kubernetes_asyncio import client

        api = self._open_client()
        core = _untyped(client).CoreV1Api(api)
        active: set[str] = set()
        try:
            async with anyio.create_task_group() as tg:
                while not self._stop.is_set():
                    for name in await self._running(core):
                        if name not in active:
                            active.add(name)
                            tg.start_soon(self._follow, core, name, active)
                    with anyio.move_on_after(self._relist):
                        while not self._stop.is_set():  # noqa: ASYNC110 - a threading.Event: poll
                            await anyio.sleep(0.2)
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await api.close()

    async def _running(self, core: Any) -> list[str]:
        import aiohttp
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            pods = await core.list_namespaced_pod(self._namespace, label_selector=self._selector)
        except (ApiException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.debug("egress.k8s.follow_list_failed", error=str(exc))
            return []
        names: list[str] = []
        for pod in pods.items:
            if pod.metadata.deletion_timestamp is not None:
                continue
            for status in (pod.status and pod.status.container_statuses) or []:
                if status.name == self._container and getattr(status.state, "running", None) is not None:
                    names.append(pod.metadata.name)
        return names

    async def _follow(self, core: Any, name: str, active: set[str]) -> None:
        """Feed `name`'s log lines from the last second read (the last second, the first time)."""
        import aiohttp
        from kubernetes_asyncio.client.exceptions import ApiException

        now = time.time()
        since = max(1, math.ceil(now - self._last.get(name, now - 1)))
        try:
            response = await core.read_namespaced_pod_log(
                name,
                self._namespace,
                container=self._container,
                follow=True,
                since_seconds=since,
                _preload_content=False,
            )
            try:
                if response.status != 200:
                    log.debug("egress.k8s.follow_refused", pod=name, status=response.status)
                    return
                async for raw in response.content:
                    self._last[name] = time.time()
                    self._denials.feed(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
            finally:
                response.release()
        except (ApiException, aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            log.debug("egress.k8s.follow_retry", pod=name, error=str(exc))
        finally:
            active.discard(name)


def _untyped(module: object) -> Any:
    return module
