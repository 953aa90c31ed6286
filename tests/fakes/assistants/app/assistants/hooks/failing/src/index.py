from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    raise LookupError("failing on purpose")
