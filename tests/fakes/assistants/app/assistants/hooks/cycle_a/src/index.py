from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    return {"delegate": {"agent_id": "hooks.cycle_b"}}
