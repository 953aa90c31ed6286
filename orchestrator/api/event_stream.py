"""Server-sent event responses (native protocol events, OpenAI chunks, image build progress)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from fastapi.responses import StreamingResponse

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_response(body: AsyncIterator[str], headers: Mapping[str, str] | None = None) -> StreamingResponse:
    """Stream `body` (already SSE-framed text) without buffering in proxies."""
    return StreamingResponse(
        body, media_type="text/event-stream; charset=utf-8", headers={**SSE_HEADERS, **(headers or {})}
    )
