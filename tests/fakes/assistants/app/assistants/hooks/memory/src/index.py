"""Pure hook: the user message is a JSON list of memory operations; the answer is their results."""

import json
from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    results = []
    for op in json.loads(messages[-1]["content"]):
        space = getattr(ctx.memory, op["space"])
        if op["op"] == "set":
            await space.set(op["key"], op["value"], ttl=op.get("ttl"))
            results.append(True)
        elif op["op"] == "get":
            results.append(await space.get(op["key"]))
        elif op["op"] == "has":
            results.append(await space.has(op["key"]))
        elif op["op"] == "delete":
            results.append(await space.delete(op["key"]))
        elif op["op"] == "keys":
            results.append(await space.keys())
    await ctx.send(json.dumps(results))
