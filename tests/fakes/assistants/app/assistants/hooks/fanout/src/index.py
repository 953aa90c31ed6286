"""Pure hook: the user message is JSON `{"method": "call|all|any|race", "calls": [...]}`; the answer
is the JSON of what ctx.agent returned."""

import json
from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    request = json.loads(messages[-1]["content"])
    method = request["method"]
    if method == "call":
        call = request["calls"][0]
        result = await ctx.agent.call(call["agent_id"], call["messages"], call.get("options"))
    else:
        result = await getattr(ctx.agent, method)(request["calls"])
    await ctx.send(json.dumps(result))
