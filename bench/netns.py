"""The floor of a box with no interface, reached through its network namespace, in one run.

`docs/performance.md` ("What would move the floor"): a box's own network costs a cold acquire
more than anything else, and a box on `--network none` starts fastest. This bench measures the
design that keeps that speed and still gives the box a way to the proxy: the host process opens a
listening socket *inside* the box's network namespace (`setns(2)` in one thread, bind, back), so
`127.0.0.1:3128` in the box is served by the host, and nothing runs in the box for it.

Two paths through the engine's SDK, measured in turn, each from `create` to the first reply:

* `none + listener`: create and start a box on `none`, place the listener in its namespace, and
  `docker exec` a request to `127.0.0.1:3128` (bash's `/dev/tcp`) that the host forwards to an
  origin server on the host, up to the origin's reply;
* `default bridge`: create and start a box on the engine's default bridge and `docker exec` `echo`,
  up to its line (what `docker run` does, the baseline of issue 14's cold-acquire target).

It needs root (`setns` into another process's namespace). Prints the medians, the ratio and what
placing the listener took. Everything it makes is labelled `cage.bench=<uuid>` and removed.
Usage: `.venv/bin/python bench/netns.py [--runs 15]`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import socket
import statistics
import sys
import threading
import time
import uuid
from typing import Any

import docker
from sandbox import BENCH_LABEL, bench_image

from orchestrator.settings import Settings

CLONE_NEWNET = 0x40000000
PORT = 3128
REPLY = b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello"
REQUEST = f"exec 3<>/dev/tcp/127.0.0.1/{PORT}; printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def listen_in(pid: int, port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:`port` in the network namespace of process `pid`.

    `setns` moves only the calling thread, so a thread of its own goes there, binds, and comes
    back; the socket stays in the namespace it was made in.
    """
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def place() -> None:
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        box = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        try:
            _setns(box)
            try:
                sock = socket.socket()
                sock.bind(("127.0.0.1", port))
                sock.listen(64)
                made.append(sock)
            finally:
                _setns(home)
        except BaseException as exc:  # reported to the caller's thread
            failed.append(exc)
        finally:
            os.close(home)
            os.close(box)

    worker = threading.Thread(target=place)
    worker.start()
    worker.join()
    if failed:
        raise failed[0]
    return made[0]


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _forward(listener: socket.socket, target: tuple[str, int]) -> None:
    """Accept on `listener` until it closes; each connection is piped to `target`."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        upstream = socket.create_connection(target)
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _origin() -> int:
    """A host server answering every request with `REPLY`; its port."""
    server = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        while True:
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(REPLY)

    threading.Thread(target=answer, daemon=True).start()
    return int(server.getsockname()[1])


def _exec(api: Any, box: str, argv: list[str]) -> bytes:
    made = api.exec_create(box, argv, user="sandbox")
    return bytes(api.exec_start(made["Id"]))


def main(runs: int) -> int:
    if os.geteuid() != 0:
        raise SystemExit("bench/netns.py needs root: it enters the boxes' network namespaces")
    client = docker.from_env()
    api = client.api
    tag = bench_image(client, Settings().base_image)
    labels = {BENCH_LABEL: uuid.uuid4().hex[:12]}
    origin = ("127.0.0.1", _origin())
    timings: dict[str, list[float]] = {"none + listener": [], "default bridge": []}
    placing: list[float] = []
    try:
        for i in range(runs + 1):
            for mode, network in (("none + listener", "none"), ("default bridge", "bridge")):
                started = time.perf_counter()
                config = api.create_host_config(network_mode=network)
                box = api.create_container(tag, ["sleep", "300"], labels=labels, host_config=config)["Id"]
                api.start(box)
                if network == "none":
                    pid = int(api.inspect_container(box)["State"]["Pid"])
                    placed = time.perf_counter()
                    listener = listen_in(pid, PORT)
                    placing.append(time.perf_counter() - placed)
                    threading.Thread(target=_forward, args=(listener, origin), daemon=True).start()
                    out = _exec(api, box, ["bash", "-c", REQUEST])
                    listener.close()
                    if not out.endswith(b"hello"):
                        raise SystemExit(f"the box did not reach the host through its listener: {out!r}")
                else:
                    out = _exec(api, box, ["echo", "hi"])
                    if out != b"hi\n":
                        raise SystemExit(f"echo in the box printed {out!r}")
                if i:  # the first round warms up
                    timings[mode].append(time.perf_counter() - started)
                api.remove_container(box, force=True)
    finally:
        for made in api.containers(all=True, filters={"label": f"{BENCH_LABEL}={labels[BENCH_LABEL]}"}):
            api.remove_container(made["Id"], force=True)
        client.close()
    ours, base = (statistics.median(timings[k]) for k in ("none + listener", "default bridge"))
    print(f"netns bench ({runs} runs each, image {tag}; create to first reply)")
    print(f"  box on none, served through its namespace  {ours * 1000:6.1f} ms   ratio {ours / base:4.2f}")
    print(f"  box on the default bridge, echo            {base * 1000:6.1f} ms   (baseline)")
    print(f"  placing the listener (setns, bind, back)    {statistics.median(placing) * 1000:6.2f} ms")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15)
    sys.exit(main(parser.parse_args().runs))
