"""Reports what the turn-scoped `context` memory holds for key `slow` (set by hooks.slow)."""

import json
from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    await ctx.memory.context.set("mine", "x")
    await ctx.send(json.dumps({"keys": await ctx.memory.context.keys()}))
