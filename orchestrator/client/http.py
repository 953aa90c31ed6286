"""`CageClient`: the HTTP side of a Cage server (sessions, the event log, SSE, sandboxes, admin)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from orchestrator.client.errors import CageApiError
from orchestrator.client.models import ExecResult, SandboxView, SessionView
from orchestrator.client.session import Frame, SessionSocket

DEFAULT_URL = "http://127.0.0.1:8080"


def _message(response: httpx.Response) -> tuple[str, str]:
    """The server's own words for a refusal: `detail`, or OpenAI's `error.message`, or the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase, ""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error), str(error.get("code") or error.get("type") or "")
        detail = body.get("detail")
        if detail is not None:
            text = detail if isinstance(detail, str) else json.dumps(detail)
            return text, str(body.get("code") or error or "")
    return json.dumps(body)[:500], ""


class CageClient:
    """An async client of one server, authenticated by an API key (a bearer token)."""

    def __init__(self, url: str = DEFAULT_URL, key: str | None = None, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(base_url=self.url, headers=self._headers, timeout=timeout)

    async def __aenter__(self) -> CageClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON body of a 2xx answer (None when empty).

        Raises:
            CageApiError: any other status, or no answer at all.
        """
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise CageApiError(0, f"{self.url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            message, code = _message(response)
            raise CageApiError(response.status_code, message, code=code)
        return response.json() if response.content else None

    # -- sessions -----------------------------------------------------------------------------
    async def sessions(self, *, limit: int = 50, owner: str | None = None) -> list[SessionView]:
        """The caller's sessions, most recently active first (an admin may name another `owner`)."""
        if owner is not None:
            rows = await self._request("GET", "/v1/admin/sessions", params={"owner": owner})
        else:
            rows = await self._request("GET", "/v1/sessions", params={"limit": limit})
        return [SessionView.model_validate(r) for r in rows]

    async def get_session(self, session_id: str) -> SessionView:
        return SessionView.model_validate(await self._request("GET", f"/v1/sessions/{quote(session_id)}"))

    async def delete_session(self, session_id: str) -> None:
        await self._request("DELETE", f"/v1/sessions/{quote(session_id)}")

    async def events(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> tuple[list[Frame], int]:
        """One page of the durable log: the events with `seq > after_seq`, and the page's last seq."""
        params: dict[str, int] = {"after_seq": after_seq}
        if limit is not None:
            params["limit"] = limit
        page = await self._request("GET", f"/v1/sessions/{quote(session_id)}/events", params=params)
        return list(page["events"]), int(page["last_seq"])

    async def history(self, session_id: str, *, after_seq: int = 0) -> AsyncIterator[Frame]:
        """Every logged event after `after_seq`, page by page."""
        while True:
            events, last = await self.events(session_id, after_seq=after_seq)
            for event in events:
                yield event
            if not events or last <= after_seq:
                return
            after_seq = last

    async def follow(self, session_id: str, *, after_seq: int = 0) -> AsyncIterator[Frame]:
        """The logged events after `after_seq`, then live ones as they happen (SSE), until cancelled."""
        path = f"/v1/sessions/{quote(session_id)}/stream"
        try:
            async with self._http.stream(
                "GET", path, params={"after_seq": after_seq}, timeout=httpx.Timeout(30.0, read=None)
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    message, code = _message(response)
                    raise CageApiError(response.status_code, message, code=code)
                data: list[str] = []
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].lstrip())
                    elif not line and data:
                        yield json.loads("\n".join(data))
                        data = []
        except httpx.TransportError as exc:
            raise CageApiError(0, f"{self.url}: {type(exc).__name__}: {exc}") from exc

    def session(
        self, session_id: str, *, assistant_id: str | None = None, after_seq: int | None = None
    ) -> SessionSocket:
        """The websocket of a session (`async with`): created on first use with `assistant_id`."""
        ws_url = "ws" + self.url.removeprefix("http")
        return SessionSocket(
            ws_url, self._headers, session_id, assistant_id=assistant_id, after_seq=after_seq
        )

    # -- models, sandboxes, admin ---------------------------------------------------------------
    async def models(self) -> list[dict[str, Any]]:
        """The assistants the caller may talk to, as OpenAI models."""
        return list((await self._request("GET", "/v1/models"))["data"])

    async def sandboxes(self, *, all_owners: bool = False, usage: bool = False) -> list[SandboxView]:
        """The caller's sandboxes, or (admin key) every owner's."""
        path = "/v1/admin/sandboxes" if all_owners else "/v1/sandboxes"
        params = {"usage": "true"} if usage else {}
        return [SandboxView.model_validate(r) for r in await self._request("GET", path, params=params)]

    async def remove_sandbox(self, name: str, *, admin: bool = False) -> None:
        """Remove a sandbox (refused with 409 while a turn runs in it)."""
        prefix = "/v1/admin/sandboxes" if admin else "/v1/sandboxes"
        await self._request("DELETE", f"{prefix}/{quote(name)}")

    async def exec(
        self,
        name: str,
        argv: list[str],
        *,
        limit_seconds: float | None = None,
        workdir: str = "",
        user: str = "",
    ) -> ExecResult:
        """Run a command in a sandbox (admin key); the output is capped and redacted by the server.

        `limit_seconds` is the server-side time limit of the command (default `CAGE_EXEC_TIMEOUT`).
        """
        body: dict[str, Any] = {"argv": argv, "workdir": workdir, "user": user}
        if limit_seconds is not None:
            body["timeout"] = limit_seconds
        result = await self._request("POST", f"/v1/admin/sandboxes/{quote(name)}/exec", json=body)
        return ExecResult.model_validate(result)
