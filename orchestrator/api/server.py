"""`CageServer`: uvicorn, with running turns ended before connections are closed.

uvicorn's shutdown closes every connection (websockets with 1012) and only then runs the app's
lifespan shutdown, so turns interrupted there send their `stream_end` to sockets that are gone.
`CageServer` stops accepting connections, lets the app end its turns (`drain`: graceful, then
forced; the cancelled `stream_end` reaches every live socket and SSE stream), and then hands over
to uvicorn's own shutdown, which finds the streams finished.
"""

from __future__ import annotations

import gc
import socket

import uvicorn
from fastapi import FastAPI

from orchestrator.api.app import drain

_GC_YOUNG = 10_000
"""New container objects between two collections of the youngest generation (Python's default is
700): a turn makes thousands, nearly all freed by reference counting long before a collection
would look at them, so the default ran one every few events."""


def settle_memory() -> None:
    """Freeze what is in memory now (a server's start-up) out of the garbage collector's reach, and
    collect the youngest generation every `_GC_YOUNG` new objects: the server's collector, which
    `bench/bridge.py` runs under too."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(_GC_YOUNG, *gc.get_threshold()[1:])


class CageServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self._app = app

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start (the app's lifespan, then the listening sockets), then freeze what start-up
        left in memory (`gc.freeze`): the modules, the app, the schemas are never garbage, and a
        full collection traversed all of them, pausing the event loop for 100-350 ms on a busy
        server (every event in flight waited). Collections now look only at what came after."""
        await super().startup(sockets)
        settle_memory()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new connections while the turns end
        await drain(self._app)
        await super().shutdown(sockets)
