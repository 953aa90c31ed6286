"""Two `cage serve` replicas on one Postgres database and one Docker engine.

```python
def test_something(replicas: Replicas) -> None:
    write_assistant(replicas.app, "tests.mine", hooks=...)  # before start, if a test needs its own
    replicas.start()                                          # A, then B (both ready)
    events = stream_turn(replicas.a.url, "chat-1", "sleep", until="sleeping")
    page = httpx.get(f"{replicas.b.url}/v1/sessions/chat-1/events", headers=HEADERS).json()
    replicas.a.kill9()
```

Each replica is a real `cage serve` subprocess on its own loopback port with its own data directory;
they share the application directory (with `tests.sleeper`, whose turn for the message `sleep`
sleeps for ten minutes after sending `sleeping`), one fresh Postgres database (dropped at the end),
the engine, and one `CAGE_SANDBOX_LABELS` value, so their sandboxes are one fleet and reconcile
touches nothing outside this test. The replica lease is short (`LEASE_SECONDS`), so a killed
replica's turns are taken over within seconds. Their logs: `replica.log` (read with `log_text()`).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from tests.fakes.assistants import make_app, write_assistant
from tests.integration.conftest import TEST_RUN_ID, TEST_RUN_LABEL
from tests.serving import ServeProcess
from tests.unit.store.conftest import postgres_url

__all__ = ["HEADERS", "KEY", "SLEEPER", "Replica", "Replicas", "postgres_url", "replicas", "stream_turn"]

KEY = "cage-bootstrap-replicas-0123456789abcdef"
HEADERS = {"Authorization": f"Bearer {KEY}"}
LEASE_SECONDS = 3.0
"""`CAGE_REPLICA_LEASE_SECONDS` of both replicas: how long a silent replica still owns its turns."""
HEARTBEAT_SECONDS = 0.5
"""`CAGE_REPLICA_HEARTBEAT_SECONDS`: how often a replica renews its lease (and looks for dead ones)."""
REAPER_SECONDS = 1.0
"""`CAGE_REAPER_INTERVAL`: the elected replica sweeps often, so a test sees its sweeps soon."""
SLEEPER = """
from typing import Any

import anyio


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    users = [m["content"] for m in messages if m.get("role") == "user"]
    if users[-1] == "sleep":
        await ctx.send("sleeping")
        await anyio.sleep(600)
    await ctx.send(f"awake: {users[-1]} (user messages seen: {len(users)})")
"""


class Replica(ServeProcess):
    """One `cage serve` subprocess with its own data directory; restartable on it and its port."""

    def __init__(self, name: str, root: Path, env: dict[str, str]) -> None:
        super().__init__(name, {**env, "CAGE_DATA_DIR": str(root / f"data-{name}")}, root / f"{name}.log")


class Replicas:
    """Replicas `a` and `b` over one database; `app` is their shared application directory."""

    def __init__(self, root: Path, database_url: str) -> None:
        self.root = root
        self.database_url = database_url
        self.app = make_app(root / "app")
        write_assistant(self.app, "tests.sleeper", hooks=SLEEPER)
        self.labels = {TEST_RUN_LABEL: TEST_RUN_ID, "cage.test-replicas": uuid.uuid4().hex}
        """Labels of every sandbox of these replicas (`label_selector` for the engine's filters)."""
        env = {
            **os.environ,
            "CAGE_APP_DIR": str(self.app),
            "CAGE_DATABASE_URL": database_url,
            "CAGE_BOOTSTRAP_ADMIN_KEY": KEY,
            "CAGE_SANDBOX_LABELS": json.dumps(self.labels),
            "CAGE_LOG_LEVEL": "INFO",
            "CAGE_REPLICA_LEASE_SECONDS": str(LEASE_SECONDS),
            "CAGE_REPLICA_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
            "CAGE_REAPER_INTERVAL": str(REAPER_SECONDS),
        }
        self.a = Replica("a", root, env)
        self.b = Replica("b", root, env)

    @property
    def label_selector(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.labels.items()]

    def start(self) -> None:
        """Start A, then B (the second start finds the schema migrated), and wait for both."""
        self.a.start()
        self.b.start()

    def stop(self) -> None:
        for replica in (self.a, self.b):
            replica.stop()


def stream_turn(
    url: str,
    session_id: str,
    content: str,
    *,
    until: str | None = None,
    assistant: str = "tests.sleeper",
    timeout: float = 60.0,
) -> list[dict[str, Any]]:
    """POST a turn to `url` and read its SSE events (up to the first one containing `until`)."""
    body = {"session_id": session_id, "messages": [{"role": "user", "content": content}]}
    events: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{url}/v1/assistants/{assistant}/stream", json=body, headers=HEADERS, timeout=timeout
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            events.append(event)
            if until is not None and until in json.dumps(event.get("props", {})):
                return events
    return events


def _create_database(base_url: str) -> tuple[str, str]:
    base = make_url(base_url)
    name = f"cage_r_{uuid.uuid4().hex[:16]}"

    async def create() -> None:
        admin = create_async_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            async with admin.connect() as conn:
                await conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            await admin.dispose()

    asyncio.run(create())
    return name, base.set(database=name).render_as_string(hide_password=False)


def _drop_database(base_url: str, name: str) -> None:
    async def drop() -> None:
        admin = create_async_engine(make_url(base_url), isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            async with admin.connect() as conn:
                await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            await admin.dispose()

    asyncio.run(drop())


@pytest.fixture
def replicas(tmp_path: Path, postgres_url: str, docker_engine: docker.DockerClient) -> Iterator[Replicas]:
    """Two replicas (not started: call `start()`), stopped and their database dropped afterwards."""
    name, url = _create_database(postgres_url)
    pair = Replicas(tmp_path, url)
    try:
        yield pair
    finally:
        pair.stop()
        selector = {"label": pair.label_selector}
        for container in docker_engine.containers.list(all=True, filters=selector):
            container.remove(force=True)
        _drop_database(postgres_url, name)
