"""Runner mode through the pipeline with real containers, and `race` cancelling a sandboxed call
whose agent is running a long command: its thread ends `cancelled` and the command is gone."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import anyio
import docker
import docker.errors
import pytest

from tests.fakes.assistants import write_assistant
from tests.integration.pipeline.conftest import KEY
from tests.pipeline_rig import Rig

pytestmark = pytest.mark.slow

WAITER = """
import anyio


async def create(ctx, messages, options):
    marker = anyio.Path(ctx.metadata["marker"])
    with anyio.fail_after(180):
        while not await marker.exists():
            await anyio.sleep(0.2)
    await ctx.send("the slow one is busy: I win")
"""


def claude(root: Path, assistant_id: str, connector: str, lifecycle: str) -> str:
    write_assistant(
        root,
        assistant_id,
        package={"name": assistant_id, "connector": connector},
        prompts="- role: system\n  content: You are a careful coding agent.\n",
        sandbox={
            "version": "2.0",
            "runner": {"name": "claude"},
            "lifecycle": lifecycle,
            "computer": {"memory": "1GB"},
        },
    )
    return assistant_id


def boxes(
    client: docker.DockerClient, rig: Rig, assistant_id: str
) -> list[docker.models.containers.Container]:
    # The rig's owner too: other tests of this session (the API's coding session) keep e2e.claude
    # boxes of their own owners alive.
    labels = [f"{k}={v}" for k, v in rig.manager.extra_labels.items()]
    labels += [f"cage.assistant={assistant_id}", "cage.owner=alice"]
    # a box removed between the listing and its inspect (a replaced or reaped one) is not listed
    return client.containers.list(all=True, filters={"label": labels}, ignore_removed=True)


def processes(container: docker.models.containers.Container) -> str:
    code, out = container.exec_run(["ps", "-eo", "pid,args"])
    assert code == 0
    return out.decode()


async def test_runner_turn_in_a_container(e2e: Rig, docker_engine: docker.DockerClient) -> None:
    assistant_id = claude(e2e.root, "e2e.claude", "fake-anthropic", "session")
    ran = await e2e.run(assistant_id, "please write hello.txt", session_id="chat-docker", limit=240)
    assert ran.result.status == "completed", ran.result.error
    assert ran.starts()[None].runner == "claude"
    assert any(e.type == "execute" for e in ran.events)
    assert "done" in ran.result.content
    session = await e2e.store.sessions.require("chat-docker")
    assert session.resume.get("claude:e2e.claude")
    [box] = boxes(docker_engine, e2e, assistant_id)
    code, out = box.exec_run(["cat", "hello.txt"], workdir="/workspace")
    assert code == 0 and out.decode().strip() == "hello"
    logged = await e2e.store.events.after("chat-docker")
    assert [e.seq for e in logged] == [e.seq for e in ran.events]
    assert KEY not in json.dumps([e.model_dump(mode="json") for e in logged])


async def test_race_cancels_the_slow_sandboxed_call_and_its_exec(
    e2e: Rig, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    slow = claude(e2e.root, "e2e.slow", "fake-slow", "session")
    write_assistant(e2e.root, "hooks.waiter", hooks=WAITER)
    marker = tmp_path / "slow-is-sleeping"

    async def watch() -> None:
        """Write the marker once `sleep 60` runs inside the slow assistant's container."""
        while True:
            found = boxes(docker_engine, e2e, slow)
            with contextlib.suppress(docker.errors.NotFound):  # gone since the listing
                if found and found[0].status == "running" and "sleep 60" in processes(found[0]):
                    marker.write_text("yes")
                    return
            await anyio.sleep(0.5)

    started = anyio.current_time()
    calls = [{"agent_id": slow, "messages": "please sleep"}, {"agent_id": "hooks.waiter", "messages": "wait"}]
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        ran = await e2e.run(
            "hooks.fanout",
            json.dumps({"method": "race", "calls": calls}),
            metadata={"marker": str(marker)},
            limit=300,
        )
    assert anyio.current_time() - started < 60  # the 60 s command was not waited for
    assert marker.read_text() == "yes"  # the slow agent really was running its command
    result = json.loads(ran.result.content)
    assert result["agent_id"] == "hooks.waiter"
    thread = ran.thread_of(slow)
    assert ran.ends()[thread].status == "cancelled"
    running = [e for e in ran.events if e.thread_id == thread and e.type == "execute"]
    assert running, "the slow agent's Bash tool never started"
    [box] = boxes(docker_engine, e2e, slow)
    table = processes(box)
    assert "sleep 60" not in table and "claude" not in table, table
