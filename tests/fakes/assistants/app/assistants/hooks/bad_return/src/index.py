from typing import Any


def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> str:
    return "not a dict"
