"""A refused connection is a `sandbox/egress_denied` event in the turn's own stream, and the shipped
`examples.codex` (an allowlist, refused outright before) validates and starts, isolated.

Real engine, real pipeline: a `yaocode` turn whose scripted tool call (from the fake model server)
asks the proxy for a name its allowlist does not hold.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import pytest
from anyio.abc import TaskGroup

from orchestrator.dsl import AppLoader
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.images import project_root
from orchestrator.sandbox.manager import SandboxManager, SandboxRequest
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.stream import EgressDenied, LifecycleEvent
from tests.fakes.assistants import make_app, write_assistant, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.integration.conftest import TEST_RUN_ID, TEST_RUN_LABEL
from tests.pipeline_rig import Rig
from tests.security import egress_rig
from tests.security.egress_rig import ALLOWED, DENIED, served_without_interface

pytestmark = [pytest.mark.docker]
docker_engine, host_server, proxy_name, egress_settings, egress_manager = egress_rig.FIXTURES

FETCH = (
    'python3 -c "import urllib.request as u\n'
    "try: u.urlopen('http://{host}:9/secret', timeout=5)\n"
    "except Exception as e: print('refused', e)\"; true"
)


@pytest.fixture(scope="module")
def model_server(docker_engine: docker.DockerClient) -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="0.0.0.0") as server:
        server.add_scenario("egress", [{"shell": FETCH.format(host=DENIED)}, {"text": "tried"}])
        yield server


@pytest.fixture
async def rig(
    tmp_path: Path, model_server: FakeModelServer, egress_settings: Settings, turn_tasks: TaskGroup
) -> AsyncIterator[Rig]:
    root = make_app(tmp_path / "app")
    write_connector(
        root, "fake", kind="anthropic", model="claude-sonnet-4-5@egress", host=model_server.url, key_env="K"
    )
    sandbox = {
        "version": "2.0",
        "runner": {"name": "yaocode"},
        "lifecycle": "oneshot",
        "computer": {"network": {"allow": [ALLOWED]}},
    }
    write_assistant(root, "sec.egress", package={"name": "egress", "connector": "fake"}, sandbox=sandbox)
    store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path / 'cage.db'}")
    await store.migrate()
    labels = {TEST_RUN_LABEL: TEST_RUN_ID}
    built = Rig.build(
        root,
        store,
        DockerBackend(egress_settings),
        tasks=turn_tasks,
        data_dir=egress_settings.data_dir,
        images=DockerImageBuilder(egress_settings),
        labels=labels,
        environ={"K": "sk-fake-egress"},
    )
    yield built
    await built.service.aclose()
    await store.aclose()


# the proxy's log reaches the turn through a follower thread within the turn's 0.3 s settle time;
# four workers on two cores delayed it past that once (the event then comes after the turn)
@pytest.mark.serial
async def test_a_refused_connection_is_an_event_of_the_turn(rig: Rig) -> None:
    ran = await rig.run("sec.egress", "fetch the secret", limit=120)
    assert ran.result.status == "completed", ran.result.error
    denied = [
        e.props for e in ran.events if isinstance(e, LifecycleEvent) and isinstance(e.props, EgressDenied)
    ]
    assert [(d.host, d.port, d.method) for d in denied] == [(DENIED, 9, "GET")]
    tool_output = json.dumps([e.model_dump(mode="json") for e in ran.events])
    assert "refused" in tool_output  # the agent saw the proxy's 403, not a timeout
    start = next(i for i, e in enumerate(ran.events) if e.props == denied[0])
    assert any(getattr(e.props, "event", "") == "stream_end" for e in ran.events[start:])


async def test_examples_codex_validates_and_starts_isolated(
    egress_settings: Settings, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    loader = AppLoader(project_root())
    codex = loader.get("examples.codex")
    assert codex.sandbox is not None and codex.sandbox.computer.network != "bridge"
    labels = {TEST_RUN_LABEL: TEST_RUN_ID, "cage.test-case": "examples-codex"}
    backend = DockerBackend(egress_settings.model_copy(update={"isolated_networks": False}))
    manager = SandboxManager(
        backend, DockerImageBuilder(egress_settings), backend._settings, extra_labels=labels
    )
    lease = await manager.acquire(
        SandboxRequest(owner="sec", assistant_id=codex.id, assistant_dir=codex.path, spec=codex.sandbox)
    )
    try:
        assert lease.isolated
        info = docker_engine.api.inspect_container(lease.ref.id)
        assert info["State"]["Running"]
        assert "HTTPS_PROXY=http://cage-egress:3128" in info["Config"]["Env"]
        if served_without_interface(docker_engine, lease.ref.id):  # its policy on the box itself
            assert list(info["NetworkSettings"]["Networks"]) == ["none"]
            assert info["Config"]["Labels"]["cage.egress.policy"] == "allow:api.openai.com"
        else:
            assert list(info["NetworkSettings"]["Networks"]) == [f"{lease.identity.name}-net"]
            network = docker_engine.api.inspect_network(f"{lease.identity.name}-net")
            assert network["Internal"]
            assert network["Labels"]["cage.egress.policy"] == "allow:api.openai.com"
    finally:
        await manager.release(lease)
