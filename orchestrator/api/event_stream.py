"""Server-sent event responses (native protocol events, OpenAI chunks, image build progress)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

from fastapi.responses import StreamingResponse

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_response(body: AsyncIterator[str], headers: Mapping[str, str] | None = None) -> StreamingResponse:
    """Stream `body` (already SSE-framed text) without buffering in proxies."""
    return StreamingResponse(
        body, media_type="text/event-stream; charset=utf-8", headers={**SSE_HEADERS, **(headers or {})}
    )


KEEPALIVE = ": keep-alive\n\n"
"""An SSE comment: clients ignore it, proxies see traffic and keep a silent stream open."""
_DONE = object()


async def watched(
    body: AsyncIterator[str],
    *,
    keepalive: float,
    still_valid: Callable[[], Awaitable[bool]] | None = None,
    check_every: float = 5.0,
    revoked: str = "",
) -> AsyncIterator[str]:
    """`body`, with a keep-alive comment after `keepalive` seconds of silence and, when
    `still_valid` is given, a check every `check_every` seconds that the caller's key still works
    (a revoked key ends the stream after the `revoked` text).

    `body` runs in its own task feeding a small queue, so waiting with a timeout never cancels it
    in the middle of an item.
    """
    queue: asyncio.Queue[object] = asyncio.Queue(16)

    async def pump() -> None:
        try:
            async for item in body:
                await queue.put(item)
        except Exception as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            await queue.put(exc)
        await queue.put(_DONE)

    task = asyncio.get_running_loop().create_task(pump())
    loop = asyncio.get_running_loop()
    last_sent = last_check = loop.time()
    tick = min(keepalive, check_every) if still_valid is not None else keepalive
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), timeout=tick)
            except TimeoutError:
                item = None
            now = loop.time()
            if still_valid is not None and now - last_check >= check_every:
                last_check = now
                if not await still_valid():
                    if revoked:
                        yield revoked
                    return
            if item is _DONE:
                return
            if isinstance(item, Exception):
                raise item
            if isinstance(item, str):
                last_sent = now
                yield item
            elif now - last_sent >= keepalive:
                last_sent = now
                yield KEEPALIVE
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
