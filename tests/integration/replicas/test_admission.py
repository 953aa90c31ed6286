"""Cluster-wide admission: 100 concurrent first messages of one session, spread over two replicas on
one Postgres database, make exactly one turn and one sandbox; all the others are refused (409)."""

from __future__ import annotations

import asyncio
import uuid

import docker
import httpx
import pytest

from tests.fakes.assistants import write_assistant
from tests.integration.replicas.conftest import HEADERS, SLEEPER, Replicas

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
BOXED = "tests.boxed"
"""The sleeper in a `session` sandbox: its box is created before the hook runs (and sleeps)."""


async def _first_messages(urls: list[str], session: str, count: int) -> list[tuple[int, str]]:
    """`count` POSTs of a first message for `session`, alternating between `urls`, all at once; each
    gives its status and (a 200) the text up to `sleeping`, or (a refusal) its error body."""
    start = asyncio.Event()

    async def one(client: httpx.AsyncClient, url: str) -> tuple[int, str]:
        await start.wait()
        body = {"session_id": session, "messages": [{"role": "user", "content": "sleep"}]}
        async with client.stream("POST", f"{url}/v1/assistants/{BOXED}/stream", json=body) as response:
            if response.status_code != 200:
                return response.status_code, (await response.aread()).decode()
            seen = ""
            async for line in response.aiter_lines():
                seen += line
                if "sleeping" in line or "stream_end" in line:
                    break
            return 200, seen

    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(headers=HEADERS, timeout=600, limits=limits) as client:
        tasks = [asyncio.create_task(one(client, urls[i % len(urls)])) for i in range(count)]
        await asyncio.sleep(0.5)  # every request is waiting on the event: they go out together
        start.set()
        return await asyncio.gather(*tasks)


def test_100_concurrent_first_messages_over_two_replicas_make_one_turn_and_one_box(
    replicas: Replicas, docker_engine: docker.DockerClient
) -> None:
    write_assistant(
        replicas.app,
        BOXED,
        hooks=SLEEPER,
        sandbox={"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session"},
    )
    replicas.start()
    session = "first-" + uuid.uuid4().hex[:8]

    results = asyncio.run(_first_messages([replicas.a.url, replicas.b.url], session, 100))

    admitted = [text for status, text in results if status == 200]
    refused = [(status, text) for status, text in results if status != 200]
    assert len(admitted) == 1, [s for s, _ in results]
    assert "sleeping" in admitted[0]
    assert len(refused) == 99
    assert {status for status, _ in refused} == {409}, refused[:3]
    assert all("already running" in text for _, text in refused), refused[:3]

    page = httpx.get(f"{replicas.a.url}/v1/sessions/{session}/events", headers=HEADERS, timeout=30).json()
    starts = [
        e for e in page["events"] if e["props"].get("event") == "stream_start" and not e.get("thread_id")
    ]
    assert len(starts) == 1, page["events"]  # one turn in the session's log

    selector = {"label": [*replicas.label_selector, f"cage.assistant={BOXED}"]}
    boxes = docker_engine.containers.list(all=True, filters=selector)
    assert len(boxes) == 1, [b.name for b in boxes]
