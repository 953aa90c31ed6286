"""Pure hook: answers `echo: <last user message>` through ctx.send."""

from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    last = [m for m in messages if m.get("role") == "user"][-1]
    await ctx.send(f"echo: {last['content']}")
