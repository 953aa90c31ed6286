"""The warm pool inside a real `cage serve`: a oneshot Claude Code assistant with `pool: {size: 1}`
(real server, real pipeline, the real CLI against the fake model server). Its first turn is cold
and leaves a paused box for the owner behind it; the second turn claims that box; stopping the
server removes the box waiting then."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import openai
import pytest

from orchestrator.api import create_app
from orchestrator.sandbox.pool import POOL
from orchestrator.settings import Settings
from tests.integration.runners.conftest import HOST_CA, App
from tests.integration.runners.conftest import app as app
from tests.integration.runners.conftest import model_server as model_server
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
WAIT = 300.0
"""Seconds a background refill may take on a loaded machine (polled, not slept)."""


@dataclass(frozen=True)
class Box:
    id: str
    name: str
    status: str
    labels: dict[str, str]


def pooled(client: docker.DockerClient, labels: dict[str, str]) -> list[Box]:
    """This test's containers made for a pool (claimed or not), read in one engine call (a box removed
    meanwhile cannot fail the listing)."""
    filters = {"label": [f"{k}={v}" for k, v in labels.items()] + [POOL]}
    rows = client.api.containers(all=True, filters=filters)
    return [Box(row["Id"], row["Names"][0].lstrip("/"), row["State"], row["Labels"] or {}) for row in rows]


def wait_for_paused(engine: docker.DockerClient, labels: dict[str, str], *, not_id: str = "") -> Box:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        ready = [c for c in pooled(engine, labels) if c.status == "paused" and c.id != not_id]
        if ready:
            return ready[0]
        time.sleep(0.2)
    raise AssertionError(f"no pooled box became ready within {WAIT:g}s")


@pytest.fixture
def served(app: App, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ServerThread, str]]:
    assert app.assistant("claude") == "e2e.claude"
    sandbox = app.root / "assistants" / "e2e" / "claude" / "sandbox.yao"
    sandbox.write_text(json.dumps({**json.loads(sandbox.read_text()), "pool": {"size": 1}}))
    monkeypatch.setenv("FAKE_MODEL_KEY", "sk-fake-e2e-key-123456")
    settings = Settings(
        app_dir=app.root,
        data_dir=app.data_dir,
        sandbox_labels=app.labels,
        bootstrap_admin_key=BOOTSTRAP_KEY,
        extra_ca_certs=Path(HOST_CA) if Path(HOST_CA).is_file() else None,
        reaper_interval=3600.0,
    )
    keys = create_keys(settings, {"dev": ("user", "dev")})
    server = ServerThread(create_app(settings)).start(timeout=60)
    try:
        yield server, keys["dev"]
    finally:
        server.stop(timeout=120)  # idempotent: the test stops it itself first


def test_a_served_oneshot_turn_claims_the_box_its_previous_turn_left_and_shutdown_removes_the_pool(
    served: tuple[ServerThread, str], app: App, docker_engine: docker.DockerClient
) -> None:
    server, token = served
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key=token, max_retries=0, timeout=300)

    def turn() -> str | None:
        answer = client.chat.completions.create(
            model="e2e.claude", messages=[{"role": "user", "content": "go"}]
        )
        return answer.choices[0].message.content

    assert pooled(docker_engine, app.labels) == []
    assert turn() == "done"  # cold: the pool fills behind it
    waiting = wait_for_paused(docker_engine, app.labels)
    assert waiting.labels["cage.assistant"] == "e2e.claude" and waiting.labels["cage.lifecycle"] == "oneshot"
    assert turn() == "done"  # claims `waiting`, which is removed once its turn is released
    deadline = time.monotonic() + WAIT
    while waiting.id in {box.id for box in pooled(docker_engine, app.labels)}:
        assert time.monotonic() < deadline, "the claimed box outlived its turn"
        time.sleep(0.2)
    again = wait_for_paused(docker_engine, app.labels, not_id=waiting.id)  # refilled after the claim
    server.stop(timeout=120)
    with pytest.raises(docker.errors.NotFound):  # the server's shutdown removed its pool
        docker_engine.containers.get(again.id)
    assert pooled(docker_engine, app.labels) == []
