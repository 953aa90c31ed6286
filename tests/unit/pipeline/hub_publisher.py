"""A process that publishes through a `SessionHub` until it is killed, for the crash tests.

`python -m tests.unit.pipeline.hub_publisher URL CHAT...`: two producers per chat publish text
events as fast as they can, and a live subscriber per chat prints `told <chat> <seq> <content>`
for every event it gets (what a client would have been told), flushed line by line.
"""

from __future__ import annotations

import asyncio
import sys

from orchestrator.pipeline.hub import SessionHub
from orchestrator.store import Store
from orchestrator.stream import TextEvent, TextProps

PRODUCERS = 2


async def main(url: str, chats: list[str]) -> None:
    store = Store.from_url(url)
    hub = SessionHub(store)
    for chat in chats:
        await hub.begin(chat)

    async def watch(chat: str) -> None:
        async for event in hub.subscribe(chat):
            assert isinstance(event, TextEvent)
            sys.stdout.write(f"told {chat} {event.seq} {event.props.content}\n")
            sys.stdout.flush()

    async def produce(chat: str, producer: int) -> None:
        n = 0
        while True:
            batch = [TextEvent(props=TextProps(content=f"p{producer}-{n}-{k}")) for k in range(1 + n % 3)]
            await hub.publish(chat, "turn-crash", batch)
            n += 1

    tasks = [asyncio.ensure_future(watch(chat)) for chat in chats]
    tasks += [asyncio.ensure_future(produce(chat, p)) for chat in chats for p in range(PRODUCERS)]
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
