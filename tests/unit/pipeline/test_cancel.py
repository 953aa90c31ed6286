"""`CancelSignal` as a tree: setting a signal sets every signal under it (made before or after),
with its strength, and never the ones above or beside it; waiting is `await signal.wait()`."""

from __future__ import annotations

import gc

import anyio

from orchestrator.pipeline.cancel import CancelSignal


def test_a_set_reaches_every_signal_under_it_and_none_above() -> None:
    root = CancelSignal()
    child, sibling = root.child(), root.child()
    grandchild = child.child()
    child.set()
    assert child.is_set() and grandchild.is_set()
    assert not root.is_set() and not sibling.is_set()
    assert not child.forced() and not grandchild.forced()


def test_a_forced_set_is_graceful_too_and_forces_the_children() -> None:
    root = CancelSignal()
    child = root.child()
    root.set(force=True)
    assert root.is_set() and root.forced() and child.is_set() and child.forced()


def test_a_graceful_then_forced_set_forces_the_children() -> None:
    root = CancelSignal()
    child = root.child().child()
    root.set()
    assert child.is_set() and not child.forced()
    root.set(force=True)
    assert child.forced()


def test_a_child_made_after_the_set_is_set_already() -> None:
    graceful, forced = CancelSignal(), CancelSignal()
    graceful.set()
    forced.set(force=True)
    late, late_forced = graceful.child(), forced.child()
    assert late.is_set() and not late.forced()
    assert late_forced.is_set() and late_forced.forced()


def test_a_finished_calls_signal_is_not_kept_by_its_parent() -> None:
    root = CancelSignal()
    root.child()
    gc.collect()
    assert len(root._children) == 0


def test_waiters_wake_on_an_ancestors_set() -> None:
    woke: list[str] = []

    async def main() -> None:
        root = CancelSignal()
        child = root.child().child()

        async def wait(name: str, waiting: anyio.Event | None = None) -> None:
            if name == "forced":
                await child.wait_forced()
            else:
                await child.wait()
            woke.append(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait, "graceful")
            tg.start_soon(wait, "forced")
            await anyio.wait_all_tasks_blocked()
            root.set()
            await anyio.wait_all_tasks_blocked()
            assert woke == ["graceful"] and child.requested.is_set()
            root.set(force=True)

    anyio.run(main)
    assert woke == ["graceful", "forced"]
