"""The hub's durability contract under group commit, on SQLite and Postgres.

A live client is only told an event once it is committed: a process killed (SIGKILL) between
batches loses nothing any subscriber got, its log is gap-free, and a new process continues it. A
client that reconnects with the last seq it got replays the rest with no gap and no duplicate.
Concurrent producers on many sessions keep every session's seq order, live and in the log alike.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from orchestrator.pipeline.hub import SessionHub
from orchestrator.store import Store
from orchestrator.stream import Event, TextEvent, TextProps

ROOT = Path(__file__).resolve().parents[3]
TOLD = 400
"""Lines of `told` the killed process must have printed before the kill."""


async def all_events(store: Store, session: str) -> list[Event]:
    events: list[Event] = []
    while True:
        page = await store.events.after(session, events[-1].seq if events else 0, limit=1000)
        events += page
        if len(page) < 1000:
            return events


def content(event: Event) -> str:
    assert isinstance(event, TextEvent)
    return event.props.content


def text(value: str) -> TextEvent:
    return TextEvent(props=TextProps(content=value))


def publish_until_killed(
    database_url: str, sessions: list[str]
) -> tuple[dict[str, list[tuple[int, str]]], str]:
    """Run the publisher process until it has told `TOLD` events, SIGKILL it; what it told, and
    its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.unit.pipeline.hub_publisher", database_url, *sessions],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    told: dict[str, list[tuple[int, str]]] = {session: [] for session in sessions}
    try:
        assert proc.stdout is not None
        count = 0
        for line in proc.stdout:
            if not line.startswith("told "):
                continue
            _, session, seq, value = line.split()
            told[session].append((int(seq), value))
            count += 1
            if count >= TOLD:
                break
        proc.send_signal(signal.SIGKILL)  # between, or in the middle of, a batch: no clean-up runs
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=60)
    return told, err


async def test_a_killed_publisher_loses_nothing_a_client_was_told(store: Store, database_url: str) -> None:
    sessions = ["crash-a", "crash-b", "crash-c"]
    for session in sessions:
        await store.sessions.create("alice", "hooks.echo", session_id=session)
    told, err = await anyio.to_thread.run_sync(publish_until_killed, database_url, sessions)
    count = sum(len(lines) for lines in told.values())
    assert count >= TOLD, f"the publisher stopped early: {err[-2000:]}"
    for session in sessions:
        logged = await all_events(store, session)
        assert [e.seq for e in logged] == list(range(1, len(logged) + 1))  # gap-free, in seq order
        assert await store.events.last_seq(session) == len(logged)
        by_seq = {e.seq: content(e) for e in logged}
        seqs = [seq for seq, _ in told[session]]
        assert seqs == list(range(1, len(seqs) + 1))  # the live client got every seq once, in order
        assert all(by_seq.get(seq) == value for seq, value in told[session])  # and each one is durable

    # A new process continues every log where the killed one's durable writes ended.
    hub = SessionHub(store)
    for session in sessions:
        last = await hub.begin(session)
        assert last == await store.events.last_seq(session)
        stamped = await hub.publish(session, "turn-after", [text("after the crash")])
        assert stamped[0].seq == last + 1
        assert [e.seq for e in await all_events(store, session)] == list(range(1, last + 2))


async def test_concurrent_producers_on_many_sessions_keep_seq_order_live_and_in_the_log(store: Store) -> None:
    sessions = [f"many-{i}" for i in range(8)]
    producers, batches = 3, 15
    expected = producers * batches * 2  # two events per batch
    hub = SessionHub(store)
    for session in sessions:
        await store.sessions.create("alice", "hooks.echo", session_id=session)
        await hub.begin(session)
    live: dict[str, list[Event]] = {session: [] for session in sessions}
    published: dict[str, list[Event]] = {session: [] for session in sessions}

    async def watch(session: str) -> None:
        async for event in hub.subscribe(session):
            live[session].append(event)
            if len(live[session]) == expected:
                return

    async def produce(session: str, producer: int) -> None:
        for n in range(batches):
            batch = [text(f"{producer}-{n}-a"), text(f"{producer}-{n}-b")]
            published[session] += await hub.publish(session, "turn-many", batch)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(watch, session)
            for session in sessions:
                for producer in range(producers):
                    tg.start_soon(produce, session, producer)
    for session in sessions:
        logged = await all_events(store, session)
        assert [e.seq for e in logged] == list(range(1, expected + 1))
        assert [e.seq for e in live[session]] == list(range(1, expected + 1))
        assert [content(e) for e in live[session]] == [content(e) for e in logged]
        # a batch stays whole and in order: its two events are neighbours in the log
        for first, second in zip(logged[::2], logged[1::2], strict=True):
            assert content(first).endswith("-a") and content(second) == content(first)[:-1] + "b"
        assert sorted(e.seq for e in published[session]) == list(range(1, expected + 1))


@pytest.mark.parametrize("resume_at", [0, 1, 17, 44])
async def test_a_reconnecting_client_replays_the_rest_without_gap_or_duplicate(
    store: Store, resume_at: int
) -> None:
    session = "reconnect"
    await store.sessions.create("alice", "hooks.echo", session_id=session)
    hub = SessionHub(store)
    await hub.begin(session)
    for n in range(15):
        await hub.publish(session, "turn-r", [text(f"{n}-{k}") for k in range(3)])  # seqs 1..45
    got: list[int] = []

    async def follow() -> None:
        async for event in hub.subscribe(session, after_seq=resume_at):
            got.append(event.seq)
            if event.seq == 60:
                return

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            for n in range(5):  # more arrive while the client catches up from the log
                await hub.publish(session, "turn-r", [text(f"late-{n}-{k}") for k in range(3)])
    assert got == list(range(resume_at + 1, 61))
