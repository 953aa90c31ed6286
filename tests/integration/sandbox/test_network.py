"""With isolation off (`Settings.isolated_networks=False`, the engine's shared bridge): `network:
none` really cuts egress; `bridge` reaches the host through host.docker.internal. The isolated
default is attacked in tests/security/test_network_egress.py."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import anyio
import docker
from anyio.abc import SocketStream

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest

REPLY = b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello"


async def fetch(
    manager: SandboxManager, lease: SandboxLease, host: str, port: int
) -> tuple[list[bytes], int]:
    script = f"timeout 3 bash -c 'exec 3<>/dev/tcp/{host}/{port} && printf \"GET / HTTP/1.0\\r\\n\\r\\n\" >&3 && cat <&3'"
    async with await manager.exec(lease, ExecSpec(argv=("sh", "-c", script))) as handle:
        lines = [item for item in [i async for i in handle] if isinstance(item, bytes)]
        return lines, await handle.wait()


async def test_none_cannot_reach_the_host_but_bridge_can(
    manager: SandboxManager, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    manager.settings.isolated_networks = False
    served: list[int] = []

    async def handle(stream: SocketStream) -> None:
        async with stream:
            # the whole request before the reply: bash's printf writes it line by line (two
            # writes), and a close with the second still unread resets the connection, so the
            # client's `cat` failed (exit 1) after reading the reply
            request = b""
            while not request.endswith(b"\r\n\r\n"):
                try:
                    request += await stream.receive()
                except anyio.EndOfStream:  # a stray connection (the listener is on every interface)
                    return
            served.append(1)
            await stream.send(REPLY)

    ipam = docker_engine.networks.get("bridge").attrs["IPAM"]["Config"][0]
    gateway = ipam.get("Gateway") or str(next(ipaddress.ip_network(ipam["Subnet"]).hosts()))
    listener = await anyio.create_tcp_listener(local_host="0.0.0.0", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    def req(network: str) -> SandboxRequest:
        spec = SandboxSpec.model_validate(
            {"version": "2.0", "runner": {"name": "claude"}, "computer": {"network": network}}
        )
        return SandboxRequest(owner="net", assistant_id="tests.net", assistant_dir=tmp_path, spec=spec)

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        bridge = await manager.acquire(req("bridge"))
        lines, code = await fetch(manager, bridge, "host.docker.internal", port)
        assert code == 0 and lines[-1] == b"hello", (code, lines)
        lines, code = await fetch(manager, bridge, gateway, port)
        assert code == 0 and lines[-1] == b"hello", (code, lines)
        assert len(served) == 2
        isolated = await manager.acquire(req("none"))
        for host in (gateway, "host.docker.internal", "1.1.1.1"):
            lines, code = await fetch(manager, isolated, host, port)
            assert code != 0 and b"hello" not in lines
        assert len(served) == 2
        await manager.release(bridge)
        await manager.release(isolated)
        tg.cancel_scope.cancel()
    await listener.aclose()
