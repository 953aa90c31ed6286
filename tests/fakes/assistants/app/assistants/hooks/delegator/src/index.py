"""Create hook delegating to hooks.echo with new messages (no model, no Next)."""

from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    return {
        "delegate": {
            "agent_id": "hooks.echo",
            "messages": [{"role": "user", "content": "from the delegator"}],
        }
    }


async def next(ctx: Any, payload: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("Next must not run after a Create delegation")
