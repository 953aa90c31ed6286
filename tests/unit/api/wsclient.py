"""A small websocket session client for tests: frames in, JSON out, events told apart from control."""

from __future__ import annotations

import json
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

Frame = dict[str, Any]


def is_control(frame: Frame) -> bool:
    return str(frame.get("type", "")).startswith("session.")


def is_stream_end(frame: Frame) -> bool:
    return (
        frame.get("type") == "event"
        and frame["props"].get("event") == "stream_end"
        and not frame.get("thread_id")
    )


class SessionClient:
    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self.events: list[Frame] = []
        self.controls: list[Frame] = []
        self._ends_seen = 0

    @classmethod
    async def open(
        cls,
        ws_url: str,
        session_id: str,
        token: str,
        *,
        assistant_id: str | None = None,
        after_seq: int | None = None,
    ) -> SessionClient:
        query = "&".join(
            f"{k}={v}" for k, v in (("assistant_id", assistant_id), ("after_seq", after_seq)) if v is not None
        )
        url = f"{ws_url}/v1/sessions/{session_id}/ws" + (f"?{query}" if query else "")
        conn = await connect(url, additional_headers={"Authorization": f"Bearer {token}"})
        return cls(conn)

    async def send(self, **frame: Any) -> None:
        await self.conn.send(json.dumps(frame))

    async def next(self) -> Frame:
        frame: Frame = json.loads(await self.conn.recv())
        (self.controls if is_control(frame) else self.events).append(frame)
        return frame

    async def control(self, kind: str) -> Frame:
        """Read until the next control frame of `kind` (events read meanwhile are kept)."""
        while True:
            frame = await self.next()
            if frame.get("type") == kind:
                return frame
            if frame.get("type") == "session.error":
                raise AssertionError(f"waiting for {kind}, got {frame}")

    async def until_stream_end(self) -> Frame:
        """The next `stream_end` not returned yet, whether it was read already or is still to come."""
        while True:
            for index in range(self._ends_seen, len(self.events)):
                if is_stream_end(self.events[index]):
                    self._ends_seen = index + 1
                    return self.events[index]
            self._ends_seen = len(self.events)
            await self.next()

    async def until_seq(self, seq: int) -> None:
        while not self.events or self.events[-1]["seq"] < seq:
            await self.next()

    async def close(self) -> None:
        await self.conn.close()
