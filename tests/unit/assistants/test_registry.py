"""`AssistantRegistry`: one lookup for file, system and stored assistants; stored ones load from
memory, are cached by version and re-read when they change; errors name the document and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.assistants import AssistantRegistry
from orchestrator.dsl import AppLoader
from orchestrator.errors import ConfigError, NotFound
from orchestrator.store import Store
from tests.fakes.assistants import write_assistant

PROMPTS = "- role: system\n  content: be brief\n"
SANDBOX = {"version": "2.0", "runner": {"name": "tai"}, "lifecycle": "session"}


@pytest.fixture
def registry(tmp_path: Path, store: Store) -> AssistantRegistry:
    app = tmp_path / "app"
    write_assistant(app, "files.echo", prompts=PROMPTS, sandbox=SANDBOX)
    return AssistantRegistry(AppLoader(app, environ={}), store)


async def test_one_registry_answers_for_a_file_and_a_stored_assistant(
    registry: AssistantRegistry, store: Store
) -> None:
    await store.assistants.create(
        "api.helper", owner="alice", package={"name": "helper"}, prompts=[{"role": "system", "content": "hi"}]
    )
    from_files = await registry.get("files.echo")
    stored = await registry.get("api.helper")
    assert from_files.path is not None and from_files.sandbox is not None
    assert from_files.own_sandbox_file and from_files.file("sandbox.yao") == from_files.path / "sandbox.yao"
    assert stored.path is None and stored.mode.value == "llm" and stored.prompts[0].content == "hi"
    assert {"files.echo", "api.helper"} <= await registry.known_ids()
    assert await registry.exists("api.helper") and not await registry.exists("api.nothing")
    with pytest.raises(NotFound):
        await registry.get("api.nothing")


async def test_a_stored_assistant_is_its_owners_unless_public(
    registry: AssistantRegistry, store: Store
) -> None:
    await store.assistants.create("api.mine", owner="alice", package={"name": "mine"}, sandbox=SANDBOX)
    await store.assistants.create(
        "api.ours", owner="alice", package={"name": "ours", "public": True}, sandbox=SANDBOX
    )
    assert (await registry.authorize("alice", "api.mine")).id == "api.mine"
    assert (await registry.authorize("bob", "api.ours")).id == "api.ours"
    with pytest.raises(NotFound, match=r"'api\.mine' not found"):
        await registry.authorize("bob", "api.mine")


async def test_an_update_is_read_by_the_next_lookup_by_version(
    registry: AssistantRegistry, store: Store
) -> None:
    await store.assistants.create("api.moving", owner="alice", package={"name": "first"}, sandbox=SANDBOX)
    first = await registry.authorize("alice", "api.moving")
    assert await registry.authorize("alice", "api.moving") is first  # same version: the same load
    await store.assistants.replace(
        "api.moving", package={"name": "second"}, sandbox={**SANDBOX, "lifecycle": "oneshot"}
    )
    second = await registry.authorize("alice", "api.moving")
    assert second.package.name == "second" and second.sandbox is not None
    assert second.sandbox.lifecycle.value == "oneshot" and first.package.name == "first"
    assert len(registry.cached_versions("api.moving")) == 2


async def test_a_stored_assistants_error_names_its_document_and_key(
    registry: AssistantRegistry, store: Store
) -> None:
    await store.assistants.create(
        "api.broken", owner="alice", package={"name": "broken"}, sandbox={**SANDBOX, "lifecycle": "forever"}
    )
    with pytest.raises(ConfigError) as refused:
        await registry.get("api.broken")
    assert refused.value.key_path == "lifecycle"
    assert str(refused.value).startswith("assistant api.broken/sandbox.yao: lifecycle:")
