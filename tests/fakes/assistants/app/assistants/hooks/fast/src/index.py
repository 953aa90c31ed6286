from typing import Any

import anyio


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    await anyio.sleep(0.2)
    await ctx.send("fast done")
