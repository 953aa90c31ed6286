"""`SessionSocket`: one session's websocket, reconnected with replay so no event is lost or doubled.

The server numbers a session's events with a gap-free `seq`; the socket remembers the last one it
passed on and, when the connection drops, reconnects with `after_seq` set to it (`docs/api.md`).
Control frames (`session.*`) are not logged and carry no `seq`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlencode

import anyio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from orchestrator.client.errors import CageApiError

Frame = dict[str, Any]
"""A server frame: a stream protocol event, or a `session.*` control frame."""

RECONNECT_ATTEMPTS = 5
"""Reconnects in a row before giving up (with 0.5 s, 1 s, 2 s, ... between them)."""
MAX_FRAME_BYTES = 64 * 2**20


def is_turn_end(frame: Frame) -> bool:
    """The root `stream_end` of a turn (nested calls end their own stream with a `thread_id`)."""
    props = frame.get("props") or {}
    return frame.get("type") == "event" and props.get("event") == "stream_end" and not frame.get("thread_id")


class SessionSocket:
    """An async context manager over `GET /v1/sessions/{session_id}/ws`."""

    def __init__(
        self,
        ws_url: str,
        headers: dict[str, str],
        session_id: str,
        *,
        assistant_id: str | None = None,
        after_seq: int | None = None,
        on_reconnect: Callable[[int], None] | None = None,
    ) -> None:
        self._base = ws_url.rstrip("/")
        self._headers = headers
        self.session_id = session_id
        self.assistant_id = assistant_id
        self.last_seq: int | None = after_seq
        """The seq of the last event passed on (None: none yet, live events only)."""
        self.ready: Frame = {}
        """The `session.ready` frame of the current connection."""
        self.on_reconnect = on_reconnect
        self._ws: ClientConnection | None = None
        self._closing = False

    async def __aenter__(self) -> SessionSocket:
        await self._connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closing = True
        if self._ws is not None:
            await self._ws.close()

    def _url(self) -> str:
        query: dict[str, str | int] = {}
        if self.assistant_id:
            query["assistant_id"] = self.assistant_id
        if self.last_seq is not None:
            query["after_seq"] = self.last_seq
        suffix = f"?{urlencode(query)}" if query else ""
        return f"{self._base}/v1/sessions/{quote(self.session_id)}/ws{suffix}"

    async def _connect(self) -> None:
        """Open the socket and read its first frame.

        Raises:
            CageApiError: the server refused the session (its `session.error` and close code).
        """
        try:
            ws = await connect(self._url(), additional_headers=self._headers, max_size=MAX_FRAME_BYTES)
        except InvalidStatus as exc:
            raise CageApiError(exc.response.status_code, "websocket upgrade refused") from exc
        except (OSError, WebSocketException) as exc:
            raise CageApiError(0, f"{self._base}: {type(exc).__name__}: {exc}") from exc
        try:
            first: Frame = json.loads(await ws.recv())
        except ConnectionClosed as exc:
            raise CageApiError(_status(exc), "the server closed the session") from exc
        if first.get("type") != "session.ready":
            await ws.close()
            code = str(first.get("code") or "")
            raise CageApiError(_status_of_frame(first), str(first.get("message") or first), code=code)
        self.ready = first
        self._ws = ws

    async def _send(self, frame: Frame) -> None:
        if self._ws is None:
            raise CageApiError(0, "the session is not connected")
        try:
            await self._ws.send(json.dumps(frame))
        except ConnectionClosed:
            await self._reconnect()
            await self._ws.send(json.dumps(frame))

    async def send(
        self, text: str, *, attachments: list[dict[str, str]] | None = None, client_id: str | None = None
    ) -> None:
        """Start a turn (the server answers `session.accepted`, or `session.error` `turn_running`)."""
        frame: Frame = {"type": "user_message", "text": text}
        if attachments:
            frame["attachments"] = attachments
        if client_id:
            frame["client_id"] = client_id
        await self._send(frame)

    async def interrupt(self, *, force: bool = False) -> None:
        """Stop the running turn: gracefully (the session stays), or at once with `force`."""
        await self._send({"type": "cancel"} if force else {"type": "interrupt"})

    async def permission(self, request_id: str, decision: str, message: str | None = None) -> None:
        """Answer a `permission/request` event with `allow` or `deny`."""
        frame: Frame = {"type": "permission_response", "request_id": request_id, "decision": decision}
        if message:
            frame["message"] = message
        await self._send(frame)

    async def resume(self, after_seq: int) -> None:
        """Replay the logged events after `after_seq`, then go on live."""
        self.last_seq = after_seq
        await self._send({"type": "resume", "after_seq": after_seq})

    async def frames(self) -> AsyncIterator[Frame]:
        """Every frame, reconnecting (with replay from `last_seq`) when the connection drops."""
        while True:
            if self._ws is None:
                await self._reconnect()
            assert self._ws is not None
            try:
                raw = await self._ws.recv()
            except ConnectionClosed as exc:
                if self._closing:
                    return
                if _status(exc) in (401, 403, 404):
                    raise CageApiError(_status(exc), "the server closed the session") from exc
                await self._reconnect()
                continue
            frame: Frame = json.loads(raw)
            seq = frame.get("seq")
            if isinstance(seq, int) and not str(frame.get("type", "")).startswith("session."):
                if self.last_seq is not None and seq <= self.last_seq:
                    continue  # already passed on before a reconnect
                self.last_seq = seq
            yield frame

    async def turn(self) -> AsyncIterator[Frame]:
        """The frames of the turn just sent, up to its root `stream_end` or a `session.error`.

        Only a refusal of the message (no turn started) is a `session.error` while one waits here:
        a turn that fails ends with `stream_end` status `error`.
        """
        async for frame in self.frames():
            yield frame
            if is_turn_end(frame) or frame.get("type") == "session.error":
                return

    async def _reconnect(self) -> None:
        delay = 0.5
        for attempt in range(1, RECONNECT_ATTEMPTS + 1):
            if self.on_reconnect is not None:
                self.on_reconnect(attempt)
            try:
                await self._connect()
                return
            except CageApiError as exc:
                if exc.status in (401, 403, 404) or attempt == RECONNECT_ATTEMPTS:
                    raise
            await anyio.sleep(delay)
            delay *= 2


def _status(exc: ConnectionClosed) -> int:
    """The HTTP-like status of a refusal close code (`4000 + status`), else 0."""
    code = exc.rcvd.code if exc.rcvd is not None else 0
    return code - 4000 if 4400 <= code < 4600 else 0


_CODE_STATUS = {"unauthorized": 401, "forbidden": 403, "not_found": 404, "conflict": 409, "rate_limited": 429}


def _status_of_frame(frame: Frame) -> int:
    return _CODE_STATUS.get(str(frame.get("code") or ""), 400)
