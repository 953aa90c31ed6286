"""`Spawn`: how a long-lived object starts background work in a task group its owner holds (the
server's `Supervisor.spawn`), instead of raw tasks of its own."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

Work = Callable[[], Coroutine[Any, Any, None]]
"""Background work: a coroutine function of no arguments."""
Spawn = Callable[[Work], None]
"""Starts `Work` in the background, in a task group someone else owns; returns at once."""
