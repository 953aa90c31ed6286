"""H10 through a whole turn: the agent (the real Claude Code CLI, scripted by the fake model)
fills a size-bounded workspace. Its own command fails with ENOSPC (the agent sees the error in
its tool result); the engine's disk, the orchestrator's database and the next turn of another
session are untouched."""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest

from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.integration.conftest import docker_engine, test_run_labels
from tests.integration.pipeline.conftest import e2e, model_server
from tests.pipeline_rig import Rig

__all__ = ["docker_engine", "e2e", "model_server", "test_run_labels"]
pytestmark = [pytest.mark.docker, pytest.mark.slow]
MiB = 2**20


def _claude(root: Path, assistant_id: str, connector: str) -> str:
    write_assistant(
        root,
        assistant_id,
        package={"name": assistant_id, "connector": connector},
        prompts="- role: system\n  content: You are a careful coding agent.\n",
        sandbox={"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session"},
    )
    return assistant_id


async def test_a_disk_fill_fails_in_the_agents_own_box_only(
    e2e: Rig, model_server: FakeModelServer, docker_engine: docker.DockerClient
) -> None:
    e2e.manager.settings = e2e.manager.settings.model_copy(update={"workspace_tmpfs_bytes": 64 * MiB})
    fill = "dd if=/dev/zero of=/workspace/fill bs=1M count=512; echo dd-exit=$?"
    model_server.add_scenario("fill-disk", [{"shell": fill}, {"text": "tried to fill it"}])
    write_connector(
        e2e.root,
        "fake-fill",
        kind="anthropic",
        model="claude-sonnet-4-5@fill-disk",
        host=model_server.url,
        key_env="FAKE_KEY",
    )
    write_connector(
        e2e.root,
        "fake-hello",
        kind="anthropic",
        model="claude-sonnet-4-5@hello",
        host=model_server.url,
        key_env="FAKE_KEY",
    )
    ran = await e2e.run(
        _claude(e2e.root, "e2e.filler", "fake-fill"), "fill the disk", session_id="chat-fill", limit=300
    )
    tool_output = json.dumps(
        [e.model_dump(mode="json") for e in ran.events if e.type in ("execute", "tool_result")]
    )
    logged = json.dumps([e.model_dump(mode="json") for e in await e2e.store.events.after("chat-fill")])
    assert "No space left on device" in tool_output and "dd-exit=1" in tool_output  # the agent's own write
    assert "No space left on device" in logged  # and the event log (the database) recorded it
    [box] = docker_engine.containers.list(
        all=True, filters={"label": "cage.session=chat-fill"}, ignore_removed=True
    )
    layer = docker_engine.api.get(
        docker_engine.api._url("/containers/{0}/json", box.id), params={"size": 1}
    ).json()
    assert layer.get("SizeRw", 0) < 64 * MiB  # the 512 MiB did not land in the writable layer either
    [volume] = [m["Name"] for m in box.attrs["Mounts"] if m["Destination"] == "/workspace"]
    assert (
        docker_engine.volumes.get(volume).attrs["Options"]["type"] == "tmpfs"
    )  # bounded, off the engine disk
    other = await e2e.run(
        _claude(e2e.root, "e2e.bystander", "fake-hello"), "write hello", session_id="chat-ok", limit=300
    )
    assert other.result.status == "completed", other.result.error  # the database and the engine carry on
