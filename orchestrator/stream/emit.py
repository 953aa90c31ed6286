"""`Emit`: where a producer hands the events it built, in order (the session emitter, a JSONL
writer, a test list). The one definition: runners, the native loop, the bridge, hooks and the
pipeline all import it from `orchestrator.stream`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from orchestrator.stream.events import Event

Emit = Callable[[Sequence[Event]], Awaitable[None]]
