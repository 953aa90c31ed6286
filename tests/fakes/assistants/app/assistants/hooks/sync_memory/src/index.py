"""A blocking (sync) hook: runs in a worker thread and still uses ctx.memory and ctx.send."""

import threading
import time
from typing import Any


def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    time.sleep(0.05)  # blocking on purpose: must not stall the event loop
    count = (ctx.memory.chat.get("count") or 0) + 1
    ctx.memory.chat.set("count", count)
    ctx.send(f"count={count} thread={threading.current_thread() is not threading.main_thread()}")
