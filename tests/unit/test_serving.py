"""`tests.serving.reserve_port`: a reserved port is given to no bind to port 0 (which a parallel
test worker's server or listener makes any time), and a server binding it with SO_REUSEADDR, as
uvicorn does, gets it."""

from __future__ import annotations

import socket

import pytest

from tests.serving import LOOPBACK, reserve_port


def test_a_reserved_port_goes_to_the_server_and_to_no_bind_to_port_0() -> None:
    reserved = {reserve_port() for _ in range(50)}
    assert len(reserved) == 50
    for _ in range(5):  # 2500 binds: ports closed without the reservation came back a few times
        held = []
        try:
            for _ in range(500):
                sock = socket.socket()
                held.append(sock)
                sock.bind((LOOPBACK, 0))
                assert sock.getsockname()[1] not in reserved
        finally:
            for sock in held:
                sock.close()
    port = reserved.pop()
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind((LOOPBACK, port))  # no SO_REUSEADDR: the reservation is in the way
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((LOOPBACK, port))
        server.listen()
        with pytest.raises(OSError):
            reserve_port(port)  # a port a server listens on is not reserved over it
    assert reserve_port(port) == port  # the server gone, the same port again (a restart)
