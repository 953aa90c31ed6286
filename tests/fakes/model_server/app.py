"""The Starlette app: routes, step selection, failure injection and streaming behaviour."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.model_server.anthropic import AnthropicApi
from tests.fakes.model_server.openai_chat import CREATED, ChatApi
from tests.fakes.model_server.openai_responses import ResponsesApi
from tests.fakes.model_server.registry import ScenarioRegistry, UnknownScenarioError
from tests.fakes.model_server.reply import build_reply, input_tokens
from tests.fakes.model_server.request_log import RequestLog, credential_digest, safe_headers
from tests.fakes.model_server.scenario import Step
from tests.fakes.model_server.wire import SseEvent, WireApi

_TICK = 0.05
"""How often a hanging response checks whether the server is stopping."""


class CutConnectionError(RuntimeError):
    """Raised inside a response body to make the ASGI server drop the connection mid-stream."""


@dataclass
class ServerState:
    """Everything the app shares with the `FakeModelServer` that owns it."""

    registry: ScenarioRegistry = field(default_factory=ScenarioRegistry)
    log: RequestLog = field(default_factory=RequestLog)
    closing: threading.Event = field(default_factory=threading.Event)


async def _record(state: ServerState, **fields: Any) -> None:
    if state.log.mirrored:
        await anyio.to_thread.run_sync(lambda: state.log.append(**fields))
    else:
        state.log.append(**fields)


async def _hang(state: ServerState, keepalive: float) -> AsyncIterator[bytes]:
    """Send nothing but an SSE comment every `keepalive` seconds until the server stops."""
    waited = 0.0
    while not state.closing.is_set():
        await anyio.sleep(_TICK)
        waited += _TICK
        if waited >= keepalive:
            waited = 0.0
            yield b": keep-alive\n\n"


async def _play(state: ServerState, events: list[SseEvent], step: Step) -> AsyncIterator[bytes]:
    for n, event in enumerate(events):
        if step.cut_after is not None and n >= step.cut_after:
            raise CutConnectionError(f"cut after {n} events")
        if step.hang_after is not None and n >= step.hang_after:
            async for comment in _hang(state, step.keepalive):
                yield comment
            return
        if step.delay:
            await anyio.sleep(step.delay)
        yield event.encode()


async def _cut_body(payload: bytes) -> AsyncIterator[bytes]:
    yield payload[: len(payload) // 2]
    raise CutConnectionError("cut mid-body")


def _failure_headers(step: Step) -> dict[str, str]:
    headers: dict[str, str] = {}
    if step.should_retry is not None:
        headers["x-should-retry"] = "true" if step.should_retry else "false"
    if step.retry_after_ms is not None:
        headers["retry-after-ms"] = str(step.retry_after_ms)
        headers["retry-after"] = str(-(-step.retry_after_ms // 1000))
    return headers


async def _read_json(request: Request) -> dict[str, Any] | None:
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _completion(state: ServerState, api: WireApi) -> Any:
    async def endpoint(request: Request) -> Response:
        base: dict[str, Any] = {
            "method": request.method,
            "path": request.url.path,
            "query": request.url.query,
            "headers": safe_headers(request.headers),
            "credential_sha256": credential_digest(request.headers),
            "api": api.name,
            "peer": f"{request.client.host}:{request.client.port}" if request.client else "",
        }
        body = await _read_json(request)
        if body is None:
            await _record(state, **base, status=400)
            return JSONResponse(api.error(400, "request body must be a JSON object"), status_code=400)
        conversation = api.read(body)
        stream = body.get("stream") is True
        base |= {"body": body, "model": conversation.model, "stream": stream}
        try:
            scenario = state.registry.resolve(conversation.model)
        except UnknownScenarioError as exc:
            await _record(state, **base, status=404)
            return JSONResponse(api.error(404, str(exc)), status_code=404)
        index, step = scenario.pick(conversation.tool_results, has_tools=bool(conversation.tools))
        base |= {"scenario": scenario.name, "step": index}
        if step.fail_status is not None and state.registry.take_failure(scenario.name, index, step):
            await _record(state, **base, status=step.fail_status)
            message = f"fake failure {step.fail_status} (scenario {scenario.name}, step {index})"
            return JSONResponse(
                api.error(step.fail_status, message),
                status_code=step.fail_status,
                headers=_failure_headers(step),
            )
        reply = build_reply(step, conversation, body)
        await _record(state, **base, usage=reply.usage, reply=reply)
        if stream:
            return StreamingResponse(
                _play(state, api.events(reply, body), step),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        if step.hang_after is not None:
            async for _ in _hang(state, step.keepalive):
                if await request.is_disconnected():
                    break
            return Response(status_code=503)
        if step.delay:
            await anyio.sleep(step.delay)
        payload = json.dumps(api.response(reply)).encode()
        if step.cut_after is not None:
            return StreamingResponse(_cut_body(payload), media_type="application/json")
        return Response(payload, media_type="application/json")

    return endpoint


def _count_tokens(state: ServerState) -> Any:
    async def endpoint(request: Request) -> Response:
        body = await _read_json(request)
        await _record(
            state,
            method="POST",
            path=request.url.path,
            query=request.url.query,
            headers=safe_headers(request.headers),
            body=body,
            api="count_tokens",
            model=str((body or {}).get("model", "")),
        )
        return JSONResponse({"input_tokens": input_tokens(body)})

    return endpoint


def _models(state: ServerState) -> Any:
    async def endpoint(request: Request) -> Response:
        await _record(
            state,
            method="GET",
            path=request.url.path,
            query=request.url.query,
            headers=safe_headers(request.headers),
            api="models",
        )
        ids = ["fake-model", *(f"scenario:{n}" for n in state.registry.names())]
        data = [
            {
                "id": i,
                "object": "model",
                "type": "model",
                "display_name": i,
                "created": CREATED,
                "created_at": "2023-11-14T22:13:20Z",
                "owned_by": "cage-fake",
            }
            for i in ids
        ]
        return JSONResponse(
            {"object": "list", "data": data, "has_more": False, "first_id": ids[0], "last_id": ids[-1]}
        )

    return endpoint


def _root(state: ServerState) -> Any:
    async def endpoint(request: Request) -> Response:
        await _record(
            state,
            method=request.method,
            path=request.url.path,
            query=request.url.query,
            headers=safe_headers(request.headers),
            api="root",
        )
        return JSONResponse({"status": "ok"})

    return endpoint


def _unknown(state: ServerState) -> Any:
    async def endpoint(request: Request) -> Response:
        body = await _read_json(request)
        await _record(
            state,
            method=request.method,
            path=request.url.path,
            query=request.url.query,
            headers=safe_headers(request.headers),
            body=body,
            api="unknown",
            status=404,
        )
        message = f"the fake model server has no route {request.method} {request.url.path}"
        return JSONResponse({"error": {"type": "not_found_error", "message": message}}, status_code=404)

    return endpoint


def create_app(state: ServerState) -> Starlette:
    """The fake model API, every route with and without the `/v1` prefix."""
    routes: list[Route] = []
    for prefix in ("/v1", ""):
        routes += [
            Route(f"{prefix}/messages/count_tokens", _count_tokens(state), methods=["POST"]),
            Route(f"{prefix}/messages", _completion(state, AnthropicApi()), methods=["POST"]),
            Route(f"{prefix}/chat/completions", _completion(state, ChatApi()), methods=["POST"]),
            Route(f"{prefix}/responses", _completion(state, ResponsesApi()), methods=["POST"]),
            Route(f"{prefix}/models", _models(state), methods=["GET"]),
        ]
    # Claude Code sends `HEAD /` to warm up the connection.
    routes.append(Route("/", _root(state), methods=["GET"]))
    # Anything else is logged too, so a CLI calling an endpoint we lack shows up in `requests`.
    routes.append(Route("/{path:path}", _unknown(state), methods=["GET", "POST", "PUT", "PATCH", "DELETE"]))
    return Starlette(routes=routes)
