"""A process that publishes through a `SessionHub` until it is killed, for the crash tests.

`python -m tests.unit.pipeline.hub_publisher URL SESSION...`: two producers per session publish text
events as fast as they can, and a live subscriber per session prints `told <session> <seq> <content>`
for every event it gets (what a client would have been told), flushed line by line.
"""

from __future__ import annotations

import asyncio
import sys

from orchestrator.pipeline.hub import SessionHub
from orchestrator.store import Store
from orchestrator.stream import TextEvent, TextProps

PRODUCERS = 2


async def main(url: str, sessions: list[str]) -> None:
    store = Store.from_url(url)
    hub = SessionHub(store)
    for session in sessions:
        await hub.begin(session)

    async def watch(session: str) -> None:
        async for event in hub.subscribe(session):
            assert isinstance(event, TextEvent)
            sys.stdout.write(f"told {session} {event.seq} {event.props.content}\n")
            sys.stdout.flush()

    async def produce(session: str, producer: int) -> None:
        n = 0
        while True:
            batch = [TextEvent(props=TextProps(content=f"p{producer}-{n}-{k}")) for k in range(1 + n % 3)]
            await hub.publish(session, "turn-crash", batch)
            n += 1

    tasks = [asyncio.ensure_future(watch(session)) for session in sessions]
    tasks += [asyncio.ensure_future(produce(session, p)) for session in sessions for p in range(PRODUCERS)]
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
