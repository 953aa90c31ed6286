"""`cage chat ASSISTANT [--session ID]`: an interactive session over the websocket.

Each line typed is a user message; the turn's text, thinking, tool runs and sandbox status are
printed as they stream. Ctrl-C during a turn interrupts it (the session stays); a second Ctrl-C,
or Ctrl-C or Ctrl-D at the prompt, quits. A dropped connection is reopened with replay from the
last event seen, so nothing is lost or printed twice. Works against a local or a remote server.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sys
from typing import Annotated

import anyio
import typer
from rich.console import Console
from rich.text import Text

from orchestrator.cli.eventview import EventView
from orchestrator.cli.remote import KeyOption, UrlOption, require_key
from orchestrator.client import CageApiError, CageClient, SessionSocket
from orchestrator.client.http import DEFAULT_URL

PROMPT = "you> "


class StdinLines:
    """Lines typed on stdin, read by the event loop itself (no thread stuck in `input()`)."""

    def __init__(self) -> None:
        self._fd = sys.stdin.fileno()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._buffer = b""
        asyncio.get_running_loop().add_reader(self._fd, self._ready)

    def _ready(self) -> None:
        data = os.read(self._fd, 65536)
        if not data:
            self._queue.put_nowait(None)
            asyncio.get_running_loop().remove_reader(self._fd)
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._queue.put_nowait(line.decode("utf-8", "replace"))

    async def next(self) -> str | None:
        """The next line, or None at end of input (Ctrl-D)."""
        return await self._queue.get()

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self._fd)


class ChatState:
    def __init__(self) -> None:
        self.in_turn = False
        self.interrupted = False


async def _converse(socket: SessionSocket, console: Console, state: ChatState) -> None:
    view = EventView(console)
    lines = StdinLines()
    try:
        while True:
            console.print(Text(PROMPT, style="bold green"), end="")
            line = await lines.next()
            if line is None:
                console.print()
                return
            if not line.strip():
                continue
            state.in_turn, state.interrupted = True, False
            await socket.send(line)
            async for frame in socket.turn():
                view.show(frame)
            state.in_turn = False
    finally:
        lines.close()


async def _signals(
    socket: SessionSocket, console: Console, state: ChatState, scope: anyio.CancelScope
) -> None:
    with anyio.open_signal_receiver(signal.SIGINT) as received:
        async for _ in received:
            if state.in_turn and not state.interrupted:
                state.interrupted = True
                console.print()
                console.print(Text("interrupting the turn (Ctrl-C again to quit)", style="yellow"))
                await socket.interrupt()
            else:
                scope.cancel()


async def _chat(url: str, key: str, assistant: str, session: str, console: Console) -> None:
    async with CageClient(url, key) as client:
        try:
            after = (await client.get_session(session)).last_seq  # go on from here, no replay of old turns
        except CageApiError as exc:
            if exc.status != 404:
                raise
            after = None
        socket = client.session(session, assistant_id=assistant, after_seq=after)
        socket.on_reconnect = lambda attempt: console.print(Text(f"[reconnecting ({attempt})]", style="dim"))
        async with socket:
            console.print(
                Text(
                    f"{assistant} · session {session} (continue later with --session {session})", style="dim"
                )
            )
            state = ChatState()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_signals, socket, console, state, tg.cancel_scope)
                await _converse(socket, console, state)
                tg.cancel_scope.cancel()


def chat(
    assistant: Annotated[str, typer.Argument(help="The assistant to talk to (`cage assistants`).")],
    session: Annotated[
        str | None, typer.Option("--session", "-s", help="Continue this session (default: a new one).")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Talk to an assistant in the terminal: Ctrl-C interrupts a turn, a second Ctrl-C quits."""
    console = Console(highlight=False)
    session_id = session or f"chat-{secrets.token_hex(4)}"
    anyio.run(_chat, url, require_key(key), assistant, session_id, console)
    console.print(Text("bye", style="dim"))
