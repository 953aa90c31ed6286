"""Websocket tickets across replicas: a ticket replica A issued opens a session socket on replica B
(no sticky sessions), once; a ticket whose key was revoked meanwhile opens nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from orchestrator.store import Store
from tests.integration.replicas.conftest import HEADERS, Replica, Replicas

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def ticket_from(replica: Replica, headers: dict[str, str]) -> str:
    answer = httpx.post(f"{replica.url}/v1/sessions/ws-ticket", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    ticket = answer.json()["ticket"]
    assert isinstance(ticket, str) and ticket.startswith("wst_")
    return ticket


def socket_url(replica: Replica, session: str, ticket: str) -> str:
    return (
        f"ws://127.0.0.1:{replica.port}/v1/sessions/{session}/ws?assistant_id=tests.sleeper&ticket={ticket}"
    )


async def first_frame(url: str) -> tuple[dict[str, Any], int | None]:
    """The first frame the socket sends, and its close code when it is a refusal (None when open)."""
    async with connect(url, open_timeout=30) as conn:
        frame = json.loads(await asyncio.wait_for(conn.recv(), 30))
        if frame["type"] != "session.error":
            return frame, None
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(conn.recv(), 30)
    assert closed.value.rcvd is not None
    return frame, closed.value.rcvd.code


def user_key(database_url: str) -> tuple[str, str]:
    """A user key for `carol` in the replicas' database, made the way `cage keys create` does."""

    async def run() -> tuple[str, str]:
        store = Store.from_url(database_url)
        try:
            return await store.keys.create_key("carol's key", "user", "carol")
        finally:
            await store.aclose()

    return asyncio.run(run())


def test_a_ticket_from_a_opens_a_socket_on_b_once(replicas: Replicas) -> None:
    replicas.start()
    ticket = ticket_from(replicas.a, HEADERS)
    ready, code = asyncio.run(first_frame(socket_url(replicas.b, "t-across", ticket)))
    assert ready["type"] == "session.ready" and code is None
    for replica in (replicas.b, replicas.a):  # used: neither replica takes it again
        refused, code = asyncio.run(first_frame(socket_url(replica, "t-across", ticket)))
        assert refused["code"] == "unauthorized" and "ticket" in refused["message"] and code == 4401
        assert ticket not in refused["message"]
    assert ticket not in replicas.a.log_text() + replicas.b.log_text()


def test_a_ticket_whose_key_was_revoked_meanwhile_opens_nothing(replicas: Replicas) -> None:
    replicas.start()
    key_id, plaintext = user_key(replicas.database_url)
    carol = {"Authorization": f"Bearer {plaintext}"}
    kept = ticket_from(replicas.a, carol)
    revoked = ticket_from(replicas.a, carol)

    async def revoke() -> None:
        store = Store.from_url(replicas.database_url)
        try:
            await store.keys.revoke(key_id)
        finally:
            await store.aclose()

    ready, code = asyncio.run(first_frame(socket_url(replicas.b, "t-carol", kept)))
    assert ready["type"] == "session.ready" and code is None
    asyncio.run(revoke())
    refused, code = asyncio.run(first_frame(socket_url(replicas.b, "t-carol", revoked)))
    assert refused["code"] == "unauthorized" and code == 4401
