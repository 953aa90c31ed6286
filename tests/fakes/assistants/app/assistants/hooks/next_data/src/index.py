"""Pure hook: Create says hello; Next returns what it saw as data."""

from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    await ctx.send("hello from create")


async def next(ctx: Any, payload: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    return {
        "data": {
            "completion": payload["completion"],
            "tools": payload["tools"],
            "error": payload["error"],
            "last": payload["messages"][-1]["content"],
            "ids": [ctx.chat_id, ctx.turn_id, ctx.assistant_id],
            "metadata": ctx.metadata.get("tag"),
        }
    }
