"""The egress proxy container on the real engine: killed, it starts again and serves.

Squid removes its pid file only when it shuts down. Killed (`docker kill`, the out-of-memory
killer), it leaves the file, and the next start of the same container, whose processes come up in
the same order, gives squid the same pid: squid took that for another instance and exited, so the
container restarted in a loop and never listened (seen in CI as "the egress proxy did not listen
within 30s"). And squid's "Accepting" line, which Cage waits for, must mean the front listens too.
"""

from __future__ import annotations

import anyio
import docker

from tests.integration.sandbox.own_proxy import OwnProxy, proxy_answer


async def test_a_killed_proxy_starts_again_and_answers_once_it_says_it_listens(
    docker_engine: docker.DockerClient, own_proxy: OwnProxy
) -> None:
    api, egress = docker_engine.api, own_proxy.egress
    proxy_id = await egress.proxy.up()  # created, started, listening
    ip = own_proxy.address(api.inspect_container(proxy_id))
    assert (await anyio.to_thread.run_sync(proxy_answer, ip))[:12] == b"HTTP/1.1 403"
    for _ in range(2):
        api.kill(proxy_id)  # SIGKILL: squid's pid file stays
        api.start(proxy_id)
        await anyio.to_thread.run_sync(egress.proxy.await_listening, proxy_id)  # raises after 30 s
        info = api.inspect_container(proxy_id)
        assert info["State"]["Running"] and info["RestartCount"] == 0  # no crash loop
        answer = await anyio.to_thread.run_sync(proxy_answer, own_proxy.address(info))
        assert answer[:12] == b"HTTP/1.1 403"  # the front, then squid
