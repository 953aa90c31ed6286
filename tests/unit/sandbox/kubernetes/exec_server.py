"""A local stand-in for the Kubernetes API server: a real aiohttp server with the pods/exec
subresource (the `v5.channel.k8s.io` channel protocol, each command run as a real local process)
and an in-memory store of pods, PVCs and NetworkPolicies (create, get, list by equality label
selector, delete; every body validated against the Kubernetes schemas, 422 otherwise) and
SelfSubjectAccessReviews answered from `denied`.

It lets the backend's REST, exec, signal, stdin and file-transfer paths run end to end (real
HTTP and websocket clients, real processes) where no cluster can run; `tests/k8s` runs the
contract against a real API server. Pods get an IP each (`10.244.0.N`). An exec in an `egress`
container (an egress proxy pod) runs with that pod's own directory for `/run/squid` and
`Store.bin` first on PATH (where a test puts a stand-in `squid`). pods/log with `follow`
streams the lines a test appends to `Store.logs[pod]` (all of them: `sinceSeconds` is ignored).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web

from tests.golden.k8s.schema import schema_errors

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")


async def _exec(store: Store, request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(protocols=PROTOCOLS)
    await ws.prepare(request)
    argv = request.query.getall("command")
    path = os.environ["PATH"]
    if request.query.get("container") == "egress" and store.root is not None:
        run = store.root / request.match_info["pod"]
        run.mkdir(parents=True, exist_ok=True)
        argv = [arg.replace("/run/squid", str(run)) for arg in argv]
        path = f"{store.bin}{os.pathsep}{path}" if store.bin else path
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": path},
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


async def _log(store: Store, request: web.Request) -> web.StreamResponse:
    pod = request.match_info["pod"]
    store.log_requests.append(dict(request.query))
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    follow = request.query.get("follow", "").lower() == "true"
    sent = 0
    while True:
        lines = store.logs.get(pod, [])
        for line in lines[sent:]:
            await response.write(line.encode() + b"\n")
        sent = len(lines)
        if not follow or request.transport is None or request.transport.is_closing():
            break  # the follower went away
        await asyncio.sleep(0.05)
    return response


class Store:
    """The objects the stand-in holds, by (resource, namespace, name), and the denied reviews."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.denied: set[tuple[str, str]] = set()
        """(verb, resource[/subresource]) that access reviews refuse."""
        self.root: Path | None = None
        """Where each egress proxy pod's `/run/squid` is (`<root>/<pod>`); None: execs run as given."""
        self.bin: Path | None = None
        """Put first on PATH of an egress proxy pod's execs."""
        self.ips = 0
        self.logs: dict[str, list[str]] = {}
        """Pod -> its log lines (pods/log)."""
        self.log_requests: list[dict[str, str]] = []


def _status(code: int, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
    return web.json_response(body, status=code)


def _selected(obj: dict[str, Any], selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, eq, value = term.partition("=")
        if (key not in labels) if not eq else labels.get(key) != value:
            return False
    return True


def _crud(store: Store, resource: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info.get("name")
        if request.method == "POST":
            body = await request.json()
            error = schema_errors(body)
            if error:
                return _status(422, error)
            key = (resource, ns, body["metadata"]["name"])
            if key in store.objects:
                return _status(409, f"{resource} {key[2]} already exists")
            body["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp="2026-12-01T22:00:00Z")
            if resource == "pods":
                started = {"running": {"startedAt": "2026-12-01T22:00:01Z"}}
                store.ips += 1
                ip = f"10.244.0.{store.ips}"
                body["status"] = {
                    "phase": "Running",
                    "podIP": ip,
                    "podIPs": [{"ip": ip}],
                    "containerStatuses": [_container_status(body, started)],
                }
            store.objects[key] = body
            return web.json_response(body, status=201)
        if name is None:
            selector = request.query.get("labelSelector", "")
            items = [
                o
                for (r, n, _), o in store.objects.items()
                if r == resource and n == ns and _selected(o, selector)
            ]
            return web.json_response({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items})
        found = store.objects.get((resource, ns, name))
        if found is None:
            return _status(404, f"{resource} {name} not found")
        if request.method == "DELETE":
            del store.objects[(resource, ns, name)]
        return web.json_response(found)

    return handle


def _container_status(pod: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    box = pod["spec"]["containers"][0]
    return {
        "name": box["name"],
        "image": box["image"],
        "imageID": "",
        "ready": True,
        "restartCount": 0,
        "state": state,
    }


def _reviews(store: Store) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        attrs = body["spec"]["resourceAttributes"]
        resource = attrs["resource"] + (f"/{attrs['subresource']}" if attrs.get("subresource") else "")
        body["status"] = {"allowed": (attrs["verb"], resource) not in store.denied}
        return web.json_response(body, status=201)

    return handle


@asynccontextmanager
async def exec_server(tmp_path: Path, store: Store | None = None) -> AsyncIterator[Path]:
    """Serve the stand-in on a free loopback port; yields a kubeconfig pointing at it."""
    store = store or Store()
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/exec", functools.partial(_exec, store))
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/log", functools.partial(_log, store))
    for prefix, resource in (
        ("/api/v1", "pods"),
        ("/api/v1", "persistentvolumeclaims"),
        ("/apis/networking.k8s.io/v1", "networkpolicies"),
    ):
        handler = _crud(store, resource)
        app.router.add_route("*", f"{prefix}/namespaces/{{ns}}/{resource}", handler)
        app.router.add_route("*", f"{prefix}/namespaces/{{ns}}/{resource}/{{name}}", handler)
    app.router.add_post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", _reviews(store))
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
