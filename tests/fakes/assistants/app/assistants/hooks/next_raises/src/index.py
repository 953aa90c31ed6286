from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    await ctx.send("before the failure")


def next(ctx: Any, payload: dict[str, Any], options: dict[str, Any]) -> None:
    raise RuntimeError("boom in next")
