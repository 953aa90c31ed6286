"""M1 and M6: API-created assistants never read the orchestrator's environment, and many turns of
one API assistant at once load it safely (from memory, one load per version, nothing on disk)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup

from orchestrator.errors import ConfigError
from orchestrator.pipeline import PipelineService
from orchestrator.store import Store
from tests.pipeline_rig import Rig

SANDBOX = {"version": "2.0", "runner": {"name": "tai"}, "lifecycle": "session"}
SECRET = "postgresql://cage:hunter2-very-secret@db/cage"


def _files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


async def test_32_concurrent_turn_starts_of_one_api_assistant_share_one_load(rig: Rig, store: Store) -> None:
    await store.assistants.create("api.shared", owner="alice", package={"name": "shared"}, sandbox=SANDBOX)
    files_before = _files_under(rig.root)
    results = []

    async def authorize() -> None:
        results.append(await rig.service.authorize("alice", "api.shared"))

    async with anyio.create_task_group() as tg:
        for _ in range(32):
            tg.start_soon(authorize)
    assert len(results) == 32 and all(a.id == "api.shared" for a in results)
    assert len({id(a) for a in results}) == 1  # loaded once, shared by every turn
    assert results[0].path is None and _files_under(rig.root) == files_before  # nothing written
    registry = rig.service.assistants
    assert len(registry.cached_versions("api.shared")) == 1

    await store.assistants.replace("api.shared", package={"name": "shared v2"}, sandbox=SANDBOX)
    updated = await rig.service.authorize("alice", "api.shared")
    assert updated.package.name == "shared v2"
    assert len(registry.cached_versions("api.shared")) == 2  # the old version stays for running turns


async def test_an_api_assistant_cannot_read_the_orchestrators_environment(
    rig: Rig, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAGE_DATABASE_URL", SECRET)
    sandbox = {**SANDBOX, "environment": {"LEAK": "$ENV.CAGE_DATABASE_URL"}}
    await store.assistants.create("api.leaky", owner="alice", package={"name": "leaky"}, sandbox=sandbox)
    with pytest.raises(ConfigError) as refused:
        await rig.service.authorize("alice", "api.leaky")
    assert "CAGE_DATABASE_URL" in str(refused.value) and SECRET not in str(refused.value)


async def test_only_the_exposed_prefix_is_readable(
    rig: Rig, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, turn_tasks: TaskGroup
) -> None:
    monkeypatch.setenv("CAGE_ASSISTANT_REGION", "eu-west")
    service = PipelineService(
        tasks=turn_tasks,
        loader=rig.loader,
        manager=rig.manager,
        store=store,
        api_env_prefix="CAGE_ASSISTANT_",
    )
    sandbox = {**SANDBOX, "environment": {"REGION": "$ENV.CAGE_ASSISTANT_REGION"}}
    await store.assistants.create("api.region", owner="alice", package={"name": "region"}, sandbox=sandbox)
    loaded = await service.authorize("alice", "api.region")
    assert loaded.sandbox is not None and loaded.sandbox.environment["REGION"] == "eu-west"
    assert os.environ.get("CAGE_ASSISTANT_REGION") == "eu-west"
    await service.aclose()
