"""Pure hook that takes 30 seconds (a loser in any/race)."""

from typing import Any

import anyio


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    await ctx.send("slow started")
    await ctx.memory.context.set("slow", "started")
    await anyio.sleep(30)
    await ctx.send("slow done")
