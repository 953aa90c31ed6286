"""The egress proxy container on the real engine: killed, it starts again and serves.

Squid removes its pid file only when it shuts down. Killed (`docker kill`, the out-of-memory
killer), it leaves the file, and the next start of the same container, whose processes come up in
the same order, gives squid the same pid: squid took that for another instance and exited, so the
container restarted in a loop and never listened (seen in CI as "the egress proxy did not listen
within 30s"). And squid's "Accepting" line, which Cage waits for, must mean the front listens too.
"""

from __future__ import annotations

import contextlib
import socket
import uuid
from pathlib import Path

import anyio
import docker
import docker.errors

from orchestrator.sandbox.docker.egress import DockerEgress
from orchestrator.sandbox.network import PROXY_PORT
from orchestrator.settings import Settings


def _answer(ip: str) -> bytes:
    """The first bytes of the proxy's answer to a request from this host (refused: no policy)."""
    with socket.create_connection((ip, PROXY_PORT), timeout=10) as conn:
        conn.sendall(b"GET http://192.0.2.7:81/ HTTP/1.0\r\n\r\n")
        return conn.recv(12)


async def test_a_killed_proxy_starts_again_and_answers_once_it_says_it_listens(
    docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    proxy = f"cage-egress-revive-{uuid.uuid4().hex[:8]}"
    settings = Settings(data_dir=tmp_path / "cage", egress_container=proxy)
    egress = DockerEgress(lambda: docker_engine.api, settings)
    api = docker_engine.api
    try:
        proxy_id = await egress._proxy_up()  # created, started, listening
        ip = api.inspect_container(proxy_id)["NetworkSettings"]["Networks"][settings.egress_network][
            "IPAddress"
        ]
        assert await anyio.to_thread.run_sync(_answer, ip) == b"HTTP/1.1 403"
        for _ in range(2):
            api.kill(proxy_id)  # SIGKILL: squid's pid file stays
            api.start(proxy_id)
            await anyio.to_thread.run_sync(egress._await_listening, proxy_id)  # raises after 30 s
            info = api.inspect_container(proxy_id)
            assert info["State"]["Running"] and info["RestartCount"] == 0  # no crash loop
            ip = info["NetworkSettings"]["Networks"][settings.egress_network]["IPAddress"]
            assert await anyio.to_thread.run_sync(_answer, ip) == b"HTTP/1.1 403"  # the front, then squid
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            api.remove_container(proxy, force=True)
