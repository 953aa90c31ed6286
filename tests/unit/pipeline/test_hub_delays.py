"""What the hub tells the door (`LoadGate.observe`): the delay of each event a live subscriber was
waiting for, from its stamp to the subscriber; never the wait of events a slow reader left queued,
never events the hub only follows."""

from __future__ import annotations

import anyio

from orchestrator.pipeline.hub import SessionHub
from orchestrator.store import Store
from orchestrator.stream import TextEvent, TextProps


def text(value: str) -> TextEvent:
    return TextEvent(props=TextProps(content=value))


async def test_only_events_a_reader_waited_for_are_reported(store: Store) -> None:
    delays: list[float] = []
    hub = SessionHub(store, on_delay=delays.append)
    await store.sessions.create("alice", "a.b", session_id="s-delays")
    await hub.begin("s-delays")
    received: list[str] = []
    stream = hub.subscribe("s-delays")

    async def read(count: int) -> None:
        for _ in range(count):
            event = await anext(stream)
            assert isinstance(event, TextEvent)
            received.append(event.props.content)

    async with anyio.create_task_group() as tg:  # the reader waits: the event is reported
        tg.start_soon(read, 1)
        await anyio.sleep(0.02)
        await hub.publish("s-delays", "t1", [text("awaited")])
    assert received == ["awaited"] and len(delays) == 1 and 0 <= delays[0] < 1

    await hub.publish("s-delays", "t1", [text("queued 1"), text("queued 2")])
    await anyio.sleep(1.1)  # a slow reader: these waited a second for it, not for the server
    await read(2)
    assert received[1:] == ["queued 1", "queued 2"] and len(delays) == 1
    await stream.aclose()


async def test_a_session_the_hub_does_not_write_reports_nothing(store: Store) -> None:
    """A replica that only follows a session (another one runs its turn) reports no delay of it."""
    delays: list[float] = []
    writer, follower = SessionHub(store), SessionHub(store, on_delay=delays.append)
    await store.sessions.create("alice", "a.b", session_id="s-followed")
    await writer.begin("s-followed")
    stream = follower.subscribe("s-followed")
    async with anyio.create_task_group() as tg:

        async def read() -> None:
            await anext(stream)

        tg.start_soon(read)
        await anyio.sleep(0.02)
        await writer.publish("s-followed", "t1", [text("elsewhere")])
        follower.fan_out("s-followed", await store.events.after("s-followed"))
    assert delays == []
    await stream.aclose()
