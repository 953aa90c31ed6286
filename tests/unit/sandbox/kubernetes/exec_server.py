"""A local stand-in for the API server's pods/exec subresource: a real aiohttp websocket server
speaking the `v5.channel.k8s.io` channel protocol, running each command as a real local process.

It lets the backend's exec, signal, stdin and file-transfer paths run end to end (real
websocket client, real processes) where no cluster can run; `tests/k8s` runs the same contract
against a real API server.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from aiohttp import WSMsgType, web

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")


async def _exec(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(protocols=PROTOCOLS)
    await ws.prepare(request)
    argv = request.query.getall("command")
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": os.environ["PATH"]},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    async def pump(stream: asyncio.StreamReader, channel: int) -> None:
        while chunk := await stream.read(65536):
            await ws.send_bytes(bytes([channel]) + chunk)

    async def feed() -> None:
        assert proc.stdin is not None
        async for msg in ws:
            if msg.type != WSMsgType.BINARY or not msg.data:
                continue
            if msg.data[0] == 0:
                proc.stdin.write(msg.data[1:])
                await proc.stdin.drain()
            elif msg.data[:2] == b"\xff\x00":
                proc.stdin.close()
        if proc.returncode is None:  # the client went away: what the kubelet does
            proc.send_signal(signal.SIGKILL)

    feeder = asyncio.ensure_future(feed())
    await asyncio.gather(pump(proc.stdout, 1), pump(proc.stderr, 2))
    code = await proc.wait()
    status: dict[str, object] = {"status": "Success"}
    if code:
        status = {
            "status": "Failure",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
        }
    if not ws.closed:
        await ws.send_bytes(b"\x03" + json.dumps(status).encode())
        await ws.close()
    feeder.cancel()
    return ws


@asynccontextmanager
async def exec_server(tmp_path: Path) -> AsyncIterator[Path]:
    """Serve pods/exec on a free loopback port; yields a kubeconfig pointing at it."""
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/exec", _exec)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    try:
        yield config
    finally:
        await runner.cleanup()
