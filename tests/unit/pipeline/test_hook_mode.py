"""Pure-hook turns through every stage boundary: Create and Next hooks, delegation, failures."""

from __future__ import annotations

from pathlib import Path

from anyio.abc import TaskGroup

from orchestrator.store import Store
from orchestrator.stream import LifecycleEvent, StreamStart
from tests.fakes.assistants import write_assistant
from tests.pipeline_rig import Rig
from tests.unit.sandbox.fakes import FakeBackend

REPO = Path(__file__).resolve().parents[3]


async def test_pure_hook_turn_is_well_formed_and_answers(rig: Rig) -> None:
    ran = await rig.run("hooks.echo", "hi there")
    assert ran.result.status == "completed"
    assert ran.result.content == "echo: hi there"
    first, last = ran.events[0], ran.events[-1]
    assert isinstance(first, LifecycleEvent) and isinstance(first.props, StreamStart)
    assert last.seq == len(ran.events) and last.thread_id is None
    assert first.props.assistant_id == "hooks.echo"
    assert ran.ends()[None].status == "completed"
    assert [e.seq for e in ran.events] == list(range(1, len(ran.events) + 1))
    assert {e.turn_id for e in ran.events} == {ran.turn.turn_id}


async def test_create_delegation_nests_the_delegate_under_a_thread(rig: Rig) -> None:
    ran = await rig.run("hooks.delegator", "please delegate")
    thread = ran.thread_of("hooks.echo")
    assert ran.texts(thread) == ["echo: from the delegator"]
    assert ran.texts(None) == []
    assert ran.ends()[thread].status == "completed"
    assert ran.result.status == "completed"
    assert ran.result.content == "echo: from the delegator"
    assert not ran.errors()  # the delegator's Next (which raises) never ran


async def test_next_hook_returns_data(rig: Rig) -> None:
    ran = await rig.run("hooks.next_data", "what do you see", metadata={"tag": "t-1"})
    data = ran.result.data
    assert isinstance(data, dict)
    assert data["completion"] is None  # pure-hook mode: no model, no runner
    assert data["tools"] == [] and data["error"] is None
    assert data["last"] == "what do you see"
    assert data["ids"] == [ran.turn.session_id, ran.turn.turn_id, "hooks.next_data"]
    assert data["metadata"] == "t-1"
    assert ran.result.content == "hello from create"


async def test_next_hook_delegation(rig: Rig) -> None:
    ran = await rig.run("hooks.next_delegate", "first")
    thread = ran.thread_of("hooks.echo")
    assert ran.texts(thread) == ["echo: after next"]
    assert ran.result.content == "echo: after next"


async def test_create_hook_exception_is_an_error_event_naming_assistant_hook_and_cause(rig: Rig) -> None:
    ran = await rig.run("hooks.create_raises", "x")
    [error] = ran.errors()
    assert error.code == "hook_error"
    assert "hooks.create_raises" in error.message
    assert "create" in error.message and "ValueError: boom in create" in error.message
    end = ran.ends()[None]
    assert end.status == "error" and end.error is not None and "boom in create" in end.error
    assert ran.result.status == "error"


async def test_next_hook_exception_keeps_the_answer_and_ends_in_error(rig: Rig) -> None:
    ran = await rig.run("hooks.next_raises", "x")
    [error] = ran.errors()
    assert "hooks.next_raises" in error.message and "hook next" in error.message
    assert "RuntimeError: boom in next" in error.message
    assert ran.result.status == "error"
    assert ran.result.content == "before the failure"


async def test_hook_returning_garbage_or_not_importing_is_an_error(rig: Rig, app_root: Path) -> None:
    ran = await rig.run("hooks.bad_return", "x")
    assert "must return a dict or None, not str" in ran.errors()[0].message
    write_assistant(app_root, "hooks.broken", hooks="def create(ctx, messages, options)\n    return None\n")
    ran = await rig.run("hooks.broken", "x")
    [error] = ran.errors()
    assert "hooks.broken" in error.message and "hook load" in error.message and "SyntaxError" in error.message
    assert ran.result.status == "error"


async def test_delegation_cycle_is_stopped_with_the_chain(rig: Rig) -> None:
    ran = await rig.run("hooks.cycle_a", "loop")
    assert ran.result.status == "error"
    assert ran.result.error is not None
    assert "call depth limit 8" in ran.result.error
    assert "hooks.cycle_a → hooks.cycle_b → hooks.cycle_a" in ran.result.error
    # every nested delegate's thread was closed (the validator checked) and ended in error
    nested = {t: end for t, end in ran.ends().items() if t is not None}
    assert len(nested) == 8 and all(end.status == "error" for end in nested.values())


async def test_sync_hook_runs_in_a_worker_thread_with_the_same_ctx(rig: Rig) -> None:
    first = await rig.run("hooks.sync_memory", "a", session_id="chat-sync")
    second = await rig.run("hooks.sync_memory", "b", session_id="chat-sync")
    assert first.result.content == "count=1 thread=True"
    assert second.result.content == "count=2 thread=True"


async def test_the_shipped_hook_example_runs_as_documented(
    store: Store, tmp_path: Path, turn_tasks: TaskGroup
) -> None:
    rig = Rig.build(REPO, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "d")
    ran = await rig.run("examples.hooks", "quiet please")
    await rig.service.aclose()
    assert ran.result.content == "You said: QUIET PLEASE"
