"""Session titles through the pipeline (real store, fake model): after the first completed turn the
`uses.title` assistant (Yao's default `__yao.title`, on the light connector) names the session; later
turns keep it; without a light or default connector no title job calls any model."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from orchestrator.pipeline import PipelineService
from orchestrator.pipeline import service as service_module
from orchestrator.pipeline.titles import clean_title, make_title
from orchestrator.store import Store
from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.pipeline_rig import Rig
from tests.unit.sandbox.fakes import FakeBackend

KEY = "sk-fake-title-key-000777"
PROMPTS = "- role: system\n  content: You are terse.\n"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="127.0.0.1") as running:
        running.add_scenario("titles", [{"text": '"Greeting the model."'}])
        yield running


def _rig(
    app_root: Path,
    store: Store,
    server: FakeModelServer,
    tmp_path: Path,
    *,
    light: bool,
    agent: str = "",
    turn_tasks: TaskGroup,
) -> Rig:
    write_connector(
        app_root, "fake", kind="openai", model="fake-model@text", host=server.url + "/v1", key_env="K"
    )
    write_connector(
        app_root, "small", kind="openai", model="fake-model@titles", host=server.url + "/v1", key_env="K"
    )
    if light:
        agent = "roles:\n  light: small\n" + agent
    if agent:
        (app_root / "agent.yml").write_text(agent)
    write_assistant(app_root, "llm.plain", package={"name": "llm", "connector": "fake"}, prompts=PROMPTS)
    return Rig.build(
        app_root, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "d", environ={"K": KEY}
    )


async def _title_of(store: Store, session_id: str) -> str:
    with anyio.fail_after(60):
        while True:
            session = await store.sessions.get(session_id)
            if session is not None and session.title:
                return session.title
            await anyio.sleep(0.05)


async def test_the_first_turn_names_the_session(
    app_root: Path, store: Store, server: FakeModelServer, tmp_path: Path, turn_tasks: TaskGroup
) -> None:
    rig = _rig(app_root, store, server, tmp_path, light=True, turn_tasks=turn_tasks)
    try:
        first = await rig.run("llm.plain", "hello model", session_id="chat-title")
        assert first.result.status == "completed"
        assert await _title_of(store, "chat-title") == "Greeting the model"
        await rig.run("llm.plain", "and again", session_id="chat-title")
    finally:
        await rig.service.aclose()
    [asked] = [r for r in server.requests.all() if r.scenario == "titles"]  # once, after the first turn
    assert "hello model" in str(asked.body["messages"]) and first.result.content in str(
        asked.body["messages"]
    )
    session = await store.sessions.get("chat-title")
    assert session is not None and session.title == "Greeting the model"
    # the title job's events stay out of the session's log
    logged = await store.events.after("chat-title")
    assert "Greeting" not in str([e.model_dump(mode="json") for e in logged])


async def test_no_light_or_default_connector_means_no_title_job(
    app_root: Path,
    store: Store,
    server: FakeModelServer,
    tmp_path: Path,
    turn_tasks: TaskGroup,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The title assistant cannot load: the first turn's job finds out; the next turns of the
    session start no job while that error stands (the loader would give it again)."""
    jobs: list[str | None] = []
    first_done = anyio.Event()

    async def counted(*args: Any, **kwargs: Any) -> str | None:
        try:
            title = await make_title(*args, **kwargs)
        finally:
            first_done.set()
        jobs.append(title)
        return title

    monkeypatch.setattr(service_module, "make_title", counted)
    rig = _rig(app_root, store, server, tmp_path, light=False, turn_tasks=turn_tasks)
    try:
        ran = await rig.run("llm.plain", "hello model", session_id="chat-untitled")
        with anyio.fail_after(10):
            await first_done.wait()
        again = await rig.run("llm.plain", "hello again", session_id="chat-untitled")
        await anyio.sleep(0.2)  # a job started by the second turn would have ended by now
    finally:
        await rig.service.aclose()
    assert ran.result.status == again.result.status == "completed"
    assert jobs == [None]  # one job, and it named nothing
    assert [r.scenario for r in server.requests.all() if r.api == "openai-chat"] == ["text", "text"]
    session = await store.sessions.get("chat-untitled")
    assert session is not None and session.title == ""


async def test_system_title_picks_the_title_jobs_connector(
    app_root: Path, store: Store, server: FakeModelServer, tmp_path: Path, turn_tasks: TaskGroup
) -> None:
    """Yao's per-agent override: `system.title` names the connector of the title job, over the
    light role's connector that `__yao.title` names."""
    server.add_scenario("named", [{"text": "Named by the override"}])
    write_connector(
        app_root, "namer", kind="openai", model="fake-model@named", host=server.url + "/v1", key_env="K"
    )
    rig = _rig(
        app_root,
        store,
        server,
        tmp_path,
        light=True,
        agent="system:\n  title: namer\n",
        turn_tasks=turn_tasks,
    )
    try:
        ran = await rig.run("llm.plain", "hello model", session_id="chat-system-title")
        assert ran.result.status == "completed"
        assert await _title_of(store, "chat-system-title") == "Named by the override"
    finally:
        await rig.service.aclose()
    assert [r.scenario for r in server.requests.all() if r.api == "openai-chat"] == ["text", "named"]


def test_a_title_is_one_clean_line() -> None:
    assert clean_title('\n  "Fixing the build."\nmore') == "Fixing the build"
    assert clean_title("# " + "x" * 300) == "x" * 120


async def test_a_service_without_titles_starts_no_title_job(
    app_root: Path, store: Store, server: FakeModelServer, tmp_path: Path, turn_tasks: TaskGroup
) -> None:
    """`cage run`'s pipeline (`titles=False`): a light connector is there, yet no title is asked."""
    rig = _rig(app_root, store, server, tmp_path, light=True, turn_tasks=turn_tasks)
    rig = replace(
        rig,
        service=PipelineService(
            tasks=turn_tasks, loader=rig.loader, manager=rig.manager, store=store, titles=False
        ),
    )
    try:
        ran = await rig.run("llm.plain", "hello model", session_id="chat-cli")
    finally:
        await rig.service.aclose()
    assert ran.result.status == "completed"
    assert [r.scenario for r in server.requests.all() if r.api == "openai-chat"] == ["text"]
    session = await store.sessions.get("chat-cli")
    assert session is not None and session.title == ""
