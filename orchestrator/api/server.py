"""`CageServer`: uvicorn, with running turns ended before connections are closed.

uvicorn's shutdown closes every connection (websockets with 1012) and only then runs the app's
lifespan shutdown, so turns interrupted there send their `stream_end` to sockets that are gone.
`CageServer` stops accepting connections, lets the app end its turns (`drain`: graceful, then
forced; the cancelled `stream_end` reaches every live socket and SSE stream), and then hands over
to uvicorn's own shutdown, which finds the streams finished.
"""

from __future__ import annotations

import socket

import uvicorn
from fastapi import FastAPI

from orchestrator.api.app import drain


class CageServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self._app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new connections while the turns end
        await drain(self._app)
        await super().shutdown(sockets)
