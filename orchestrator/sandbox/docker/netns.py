"""The way out of a box with no network interface: the host serves its loopback, from inside.

A box on `network_mode: none` has a network namespace with only `lo` in it: nothing it sends leaves
it. `NamespaceRelay.place` opens two listening sockets *inside* that namespace (a thread enters it
with `setns(2)`, binds, and comes back; a socket stays in the namespace it was made in), on
`127.0.0.1:PROXY_PORT` and `127.0.0.1:GATEWAY_PORT`, where `cage-egress` and `cage-gateway` resolve
in the box (`/etc/hosts`). Each connection the box makes there is piped, from this process, to
the egress proxy's front over an abstract Unix socket in the proxy's own network namespace
(`connect_in`: entered the same way; only the proxy's processes and a process that can enter that
namespace reach it, no file, no permission to get wrong), after a PROXY protocol header naming the
box by `box_address`: squid applies that address's policy, as it applies a box network's subnet's.
Nothing runs in the box for it, the box cannot reach the sockets' other end, and the header is
written before a byte of the box's.

The listeners are this process's: they close with it, and a process that adopts a running box
places them again before the box's next exec (`serving`). A port the box took meanwhile (it could
bind `127.0.0.1:3128` while nobody held it) makes `place` fail: that box is not served; a port held
by a process outside the box (another Cage process on this host serving it) means it is served
already. The namespace is entered only once the process the engine named is checked to be the
box's (`box_namespace`): a pid means nothing to a process in a PID namespace of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import functools
import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import structlog

from orchestrator.errors import SandboxError
from orchestrator.sandbox.network import GATEWAY_PORT, PROXY_PORT

log = structlog.get_logger(__name__)

_T = TypeVar("_T")

BOX_PREFIX = ipaddress.IPv6Network("fd63:6167:6500::/48")
"""Where `box_address` takes the addresses squid knows namespace boxes by: a unique local range
(never routed) that no box, network or host uses."""
SOCKETS = {PROXY_PORT: "cage-forward", GATEWAY_PORT: "cage-gateway"}
"""The front's abstract Unix socket (`abns@` in `images/egress/haproxy.cfg`) for each port a box's
loopback is served on."""
_CLONE_NEWNET = 0x40000000
_CHUNK = 65536
_SUN_PATH = 108
"""The size of `sockaddr_un.sun_path` on Linux."""


def box_address(container_id: str) -> ipaddress.IPv6Address:
    """The address squid knows the box with engine id `container_id` by: `BOX_PREFIX` and the
    id's first 80 bits. The engine's ids are random and unique, so no two boxes share one, and
    any process derives it from the id alone (nothing to allocate, nothing to agree on)."""
    if len(container_id) < 20:
        raise ValueError(f"not a full container id: {container_id!r}")
    return BOX_PREFIX[int(container_id[:20], 16)]


def namespaces_supported() -> bool:
    """Whether this process can enter other processes' network namespaces: root, with `setns`."""
    return os.geteuid() == 0 and hasattr(_libc(), "setns") and Path("/proc/thread-self/ns/net").exists()


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, loaded once, when a namespace is first entered (not at import)."""
    return ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc().setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def box_namespace(pid: int, container_id: str) -> int:
    """An open descriptor of the network namespace of box `container_id`, whose main process the
    engine says is `pid` (in this process's PID namespace).

    The process is checked to be the box's (its cgroup names the container) through a descriptor
    of its `/proc` directory, which stays tied to that process: a pid reused meanwhile, or one
    that means another process here (this process in a PID namespace of its own), is refused.

    Raises:
        OSError: no such process, or it is not the box's.
    """
    proc = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        cgroup = os.open("cgroup", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc)
        try:
            owner = os.read(cgroup, 65536)
        finally:
            os.close(cgroup)
        if not _names(owner, container_id):
            raise OSError(errno.ESRCH, f"process {pid} is not box {container_id[:12]}'s")
        return os.open("ns/net", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc)
    finally:
        os.close(proc)


def _names(cgroup: bytes, container_id: str) -> bool:
    """Whether a process's `/proc/<pid>/cgroup` says it runs in box `container_id`."""
    return container_id.encode("ascii") in cgroup


def _is_box(pid: int, container_id: str) -> bool:
    """Whether process `pid` runs in box `container_id` (its cgroup names the container)."""
    try:
        return _names(Path(f"/proc/{pid}/cgroup").read_bytes(), container_id)
    except OSError:
        return False


def _listener_inode(pid: int, port: int) -> int | None:
    """The inode of the socket listening on `127.0.0.1:port` in process `pid`'s network namespace."""
    local = f"0100007F:{port:04X}"
    try:
        for row in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
            fields = row.split()
            if fields[1] == local and fields[3] == "0A":  # LISTEN
                return int(fields[9])
    except OSError:
        return None
    return None


def held_inside(pid: int, port: int) -> bool:
    """Whether a process of the box whose main process is `pid` (one in its network namespace)
    holds the listener on `127.0.0.1:port` there; False when the holder is outside it (another Cage
    process on this host serving the box: the socket is in the box's namespace, its owner is not)."""
    inode = _listener_inode(pid, port)
    if inode is None:
        return False
    try:
        namespace = Path(f"/proc/{pid}/ns/net").stat().st_ino
    except OSError:
        return False
    target = f"socket:[{inode}]"
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        try:
            if (process / "ns" / "net").stat().st_ino != namespace:
                continue
            if any(str(fd.readlink()) == target for fd in (process / "fd").iterdir()):
                return True
        except OSError:  # gone meanwhile, or not ours to look at
            continue
    return False


def inside(namespace: int, work: Callable[[], _T]) -> _T:
    """`work()`, run by a thread of its own in network namespace `namespace` (a descriptor):
    `setns(2)` moves only the calling thread, and a socket made there stays in that namespace.

    Raises:
        OSError: the namespace cannot be entered, or what `work` raised.
    """
    made: list[_T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            failed.append(exc)
            return
        try:
            _setns(namespace)
            try:
                made.append(work())
            finally:
                _setns(home)  # a thread that cannot come back must not live on: it ends here
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failed.append(exc)
        finally:
            os.close(home)

    worker = threading.Thread(target=run, name="cage-netns")
    worker.start()
    worker.join()
    if failed:
        raise failed[0]
    return made[0]


def listen_in(namespace: int, port: int) -> socket.socket:
    """A socket listening on `127.0.0.1:port` in network namespace `namespace` (a descriptor).

    Raises:
        OSError: the namespace cannot be entered, or the port is taken there (`EADDRINUSE`).
    """

    def bind() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        return sock

    return inside(namespace, bind)


def abstract_address(name: str) -> bytes:
    """The address of HAProxy's `abns@name`: the whole `sun_path` (108 bytes), a NUL, the name
    and NULs after it (HAProxy binds the padded form; a shorter address is another socket)."""
    return (b"\0" + name.encode("ascii")).ljust(_SUN_PATH, b"\0")


def connect_in(namespace: int, name: str) -> socket.socket:
    """A socket connected to HAProxy's abstract socket `abns@name` of network namespace `namespace`.

    Raises:
        OSError: the namespace cannot be entered, or nothing listens there under that name.
    """

    def connect() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(abstract_address(name))
        except OSError:
            sock.close()
            raise
        return sock

    return inside(namespace, connect)


def proxy_header(source: ipaddress.IPv6Address, source_port: int, port: int) -> bytes:
    """The PROXY protocol (v1) line naming `source` as the client of a connection to `port`."""
    return f"PROXY TCP6 {source} ::1 {source_port} {port}\r\n".encode("ascii")


@dataclass
class _Box:
    address: ipaddress.IPv6Address
    pid: int
    servers: list[asyncio.AbstractServer] = field(default_factory=list)
    pipes: set[asyncio.Task[None]] = field(default_factory=set)


class NamespaceRelay:
    """Serves the loopback of boxes with no interface (module docstring); one per process.

    Its listeners and pipes run on an event loop of their own, in a daemon thread, so they do not
    depend on the caller's loop (the backend's calls run in worker threads)."""

    def __init__(self, front: Callable[[int | None], int]) -> None:
        """`front(stale)`: a descriptor of the proxy's network namespace, found anew when it is
        `stale` (the one a connection failed in: the proxy was started again meanwhile)."""
        self._front = front
        self._boxes: dict[str, _Box] = {}
        self._elsewhere: dict[str, int] = {}
        """Box id -> its main process, for boxes another Cage process serves (`place`)."""
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- public (any thread) --------------------------------------------------------------------

    def place(self, container_id: str, pid: int) -> None:
        """Serve box `container_id` (its main process: `pid`) from now on, replacing what served
        an earlier start of it.

        Raises:
            SandboxError: its namespace cannot be entered, or the box holds one of the ports.
        """
        self.remove(container_id)
        address = box_address(container_id)
        listeners: list[tuple[int, socket.socket]] = []
        try:
            namespace = box_namespace(pid, container_id)
            try:
                for port in SOCKETS:
                    listeners.append((port, listen_in(namespace, port)))
            finally:
                os.close(namespace)
        except OSError as exc:
            for _, made in listeners:
                made.close()
            if exc.errno == errno.EADDRINUSE and not any(held_inside(pid, port) for port in SOCKETS):
                log.debug("netns.served_elsewhere", box=container_id[:12])
                with self._lock:  # another Cage process on this host serves it (a replica)
                    self._elsewhere[container_id] = pid
                return
            what = f"cannot enter its namespace: {exc}"
            if exc.errno == errno.EADDRINUSE:
                what = "the box holds the port its way out is served on"
            raise SandboxError(container_id[:12], what) from exc
        box = _Box(address=address, pid=pid)
        try:
            self._call(self._serve(box, listeners))
        except BaseException:
            for _, made in listeners:
                made.close()
            raise
        with self._lock:
            self._boxes[container_id] = box
        log.debug("netns.placed", box=container_id[:12], address=str(address))

    def placed(self, container_id: str, pid: int) -> bool:
        """Whether box `container_id`, as its process `pid` runs it, is served: by this process, or
        by another one on this host (`place` found its listeners, held outside the box)."""
        with self._lock:
            box = self._boxes.get(container_id)
            elsewhere = self._elsewhere.get(container_id)
        return (box is not None and box.pid == pid) or elsewhere == pid

    def serving(self, container_id: str) -> bool:
        """Whether box `container_id` is served as it runs now, without asking the engine: the
        process it was served for still runs in it (a box started again behind Cage's back has a
        new one, in a new namespace)."""
        with self._lock:
            box = self._boxes.get(container_id)
            pid = box.pid if box is not None else self._elsewhere.get(container_id)
        return pid is not None and _is_box(pid, container_id)

    def served(self) -> list[str]:
        """The ids of the boxes served now."""
        with self._lock:
            return list(self._boxes)

    def remove(self, container_id: str) -> None:
        """Stop serving box `container_id`: no new connection, and the open ones are cut."""
        with self._lock:
            box = self._boxes.pop(container_id, None)
            self._elsewhere.pop(container_id, None)
        if box is not None and self._loop is not None:
            self._call(self._close(box))

    def close(self) -> None:
        """Stop serving every box and end the loop's thread."""
        with self._lock:
            boxes, self._boxes = list(self._boxes.values()), {}
            self._elsewhere.clear()
            loop, self._loop = self._loop, None
        if loop is None:
            return
        for box in boxes:
            asyncio.run_coroutine_threadsafe(self._close(box), loop).result()
        loop.call_soon_threadsafe(loop.stop)  # its thread closes it

    # --- the loop's side ------------------------------------------------------------------------

    def _call(self, work: Coroutine[Any, Any, _T]) -> _T:
        with self._lock:
            if self._loop is None:
                self._loop = _loop_thread()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(work, loop).result()

    async def _serve(self, box: _Box, sockets: list[tuple[int, socket.socket]]) -> None:
        for port, listener in sockets:
            handler = self._handler(box, port)
            box.servers.append(await asyncio.start_server(handler, sock=listener))

    def _handler(
        self, box: _Box, port: int
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            box.pipes.add(task)
            try:
                await self._pipe(box, port, reader, writer)
            finally:
                box.pipes.discard(task)

        return handle

    async def _pipe(
        self, box: _Box, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        ends = [writer]
        try:
            source_port = int(writer.get_extra_info("peername")[1])
            connecting = asyncio.ensure_future(asyncio.to_thread(self._connect_front, port))
            try:
                upstream = await asyncio.shield(connecting)
            except OSError as exc:
                log.warning("netns.front_unreachable", box=str(box.address), error=str(exc))
                return
            except asyncio.CancelledError:  # the box goes: the socket still on its way is closed
                connecting.add_done_callback(_close_landed)
                raise
            try:
                up_reader, up_writer = await asyncio.open_unix_connection(sock=upstream)
            except BaseException:
                upstream.close()
                raise
            ends.append(up_writer)
            up_writer.write(proxy_header(box.address, source_port, port))
            await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))
        finally:
            for end in ends:
                end.close()

    def _connect_front(self, port: int) -> socket.socket:
        namespace = self._front(None)
        try:
            return connect_in(namespace, SOCKETS[port])
        except OSError:  # the proxy started again (a new namespace): find it, once
            return connect_in(self._front(namespace), SOCKETS[port])

    async def _close(self, box: _Box) -> None:
        for server in box.servers:
            server.close()
        pipes = list(box.pipes)
        for task in pipes:
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)
        for server in box.servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()


def _loop_thread() -> asyncio.AbstractEventLoop:
    """A new event loop running in a daemon thread of its own, closed there once stopped."""
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        try:
            loop.run_forever()
        finally:
            loop.close()

    threading.Thread(target=run, name="cage-netns", daemon=True).start()
    started.wait()
    return loop


def _close_landed(connecting: asyncio.Future[socket.socket]) -> None:
    """Close the socket a connection made for a pipe that was cancelled meanwhile."""
    if not connecting.cancelled() and connecting.exception() is None:
        connecting.result().close()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until `reader` ends, then end `writer`'s side (the other direction may go on)."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()
