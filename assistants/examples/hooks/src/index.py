"""Pure-hook example: `create` answers the user itself through `ctx.send`, no model involved."""

from __future__ import annotations

from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    """Echo the last user message back, in upper case."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    text = str(last.get("content", "")) if last else ""
    await ctx.send({"type": "text", "props": {"content": f"You said: {text.upper()}"}})
    return {}
