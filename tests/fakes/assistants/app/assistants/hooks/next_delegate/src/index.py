"""Pure hook whose Next hands the turn to hooks.echo."""

from typing import Any


async def next(ctx: Any, payload: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    return {"delegate": {"agent_id": "hooks.echo", "messages": [{"role": "user", "content": "after next"}]}}
