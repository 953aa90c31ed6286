"""One CLI permission request that covers several subjects, asked as one `PermissionAsk` each.

A codex patch or an opencode edit may touch several files; a rule like `write: "src/**"` must
hold for every one of them, so each path is its own `ToolRequest`. The CLI still wants a single
answer: `split_asks` gives every part a reply that writes nothing until the CLI's answer is
known. The first refusal answers at once (with its message); the allow goes out with the last
allowed part. Later replies after the answer write nothing, so the CLI hears exactly once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from orchestrator.permissions import Decision, ToolRequest
from runners.base import PermissionAsk


class _Parts:
    def __init__(self, count: int, reply: Callable[[Decision], bytes]) -> None:
        self._left = count
        self._reply = reply
        self._answered = False
        self._lock = threading.Lock()

    def reply(self, decision: Decision) -> bytes:
        with self._lock:
            if self._answered:
                return b""
            self._left -= 1
            if decision.allow and self._left > 0:
                return b""
            self._answered = True
        return self._reply(decision)


def split_asks(requests: Sequence[ToolRequest], reply: Callable[[Decision], bytes]) -> list[PermissionAsk]:
    """One `PermissionAsk` per request; `reply` is called once, with the deciding decision."""
    if len(requests) == 1:
        return [PermissionAsk(request=requests[0], reply=reply)]
    parts = _Parts(len(requests), reply)
    return [PermissionAsk(request=request, reply=parts.reply) for request in requests]
