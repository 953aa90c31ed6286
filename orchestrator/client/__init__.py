"""A typed async client of a Cage server: sessions over the websocket (send, interrupt, permission
answers, replay after a reconnect), the durable event log and its SSE stream, sandboxes and the
admin API. `cage session`, `cage ps`, `cage logs`, `cage exec`, `cage rm` and `cage sessions` are thin
commands on it.

    async with CageClient("http://127.0.0.1:8080", key) as cage:
        async with cage.session("s1", assistant_id="app.chat") as session:
            await session.send("hi")
            async for event in session.turn():
                ...

Events and frames are the server's JSON objects (`dict`), so a newer server's extra fields reach
the caller untouched; `schemas/stream-v1.json` and `schemas/ws-v1.json` describe them.
"""

from orchestrator.client.errors import CageApiError
from orchestrator.client.http import CageClient
from orchestrator.client.models import ExecResult, SandboxView, SessionView
from orchestrator.client.session import Frame, SessionSocket

__all__ = ["CageApiError", "CageClient", "ExecResult", "Frame", "SandboxView", "SessionSocket", "SessionView"]
