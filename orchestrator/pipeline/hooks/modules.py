"""`HookModules`: an assistant's hooks, invoked safely: `src/index.py` imported in isolation, or
Yao's `src/index.ts` run by `orchestrator.hooks_ts` in a locked-down node process.

Each load gets a module name of its own (`cage_hooks.<assistant>__<n>`), so two assistants' hook
files never collide in `sys.modules`, and a reloaded assistant (the loader hands out a new
`Assistant` object) gets a freshly imported module. Async hooks run on the event loop; sync hooks
run in a worker thread, where the `ctx` methods block on the loop instead of returning awaitables.
Whatever a hook raises becomes a `HookError` naming the assistant, the hook and the exception.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import re
import sys
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import anyio
import structlog
from anyio import to_thread

from orchestrator.dsl import Assistant
from orchestrator.errors import HookError
from orchestrator.hooks_ts import TsHooks, TsRuntimeError
from orchestrator.pipeline.hooks.results import CreateResult, NextResult

log = structlog.get_logger(__name__)
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
MODULE_PREFIX = "cage_hooks"


@dataclass(frozen=True)
class HookOutcome:
    """What invoking a hook gave: `defined` False when the module has no such function."""

    defined: bool
    value: object = None
    dropped: tuple[str, ...] = ()
    """Keys of the returned dict that no Cage hook result has (TypeScript hooks), left out."""


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class HookModules:
    """Loads and caches hook modules per assistant; reloads when the assistant object changes."""

    def __init__(self, ts: TsHooks | None = None) -> None:
        self._loaded: dict[str, tuple[Assistant, ModuleType]] = {}
        self._lock = anyio.Lock()
        self._counter = itertools.count(1)
        self.ts = ts or TsHooks()

    async def module(self, assistant: Assistant) -> ModuleType | None:
        """The assistant's hook module, or None when it has no `src/index.py`.

        Raises:
            HookError: the file does not import (syntax error, failing top-level code).
        """
        if assistant.hooks_path is None or assistant.hooks_language != "python":
            return None
        cached = self._loaded.get(assistant.id)
        if cached is not None and cached[0] is assistant:
            return cached[1]
        async with self._lock:
            cached = self._loaded.get(assistant.id)
            if cached is not None and cached[0] is assistant:
                return cached[1]
            module = await to_thread.run_sync(self._import, assistant)
            if cached is not None:
                sys.modules.pop(cached[1].__name__, None)
            self._loaded[assistant.id] = (assistant, module)
            return module

    def _import(self, assistant: Assistant) -> ModuleType:
        assert assistant.hooks_path is not None
        name = f"{MODULE_PREFIX}.{_UNSAFE.sub('_', assistant.id)}__{next(self._counter)}"
        spec = importlib.util.spec_from_file_location(name, assistant.hooks_path)
        if spec is None or spec.loader is None:
            raise HookError(assistant.id, "load", f"cannot import {assistant.hooks_path.name}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and typing look their module up here
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise HookError(assistant.id, "load", _describe(exc)) from exc
        return module

    async def invoke(self, assistant: Assistant, hook: str, *args: Any) -> HookOutcome:
        """Call `hook(*args)` from the assistant's module, sync or async.

        Raises:
            HookError: the module does not load, or the hook raised.
        """
        if assistant.hooks_language == "typescript":
            return await self._invoke_ts(assistant, hook, *args)
        module = await self.module(assistant)
        fn = getattr(module, hook, None) if module is not None else None
        if fn is None or not callable(fn):
            return HookOutcome(defined=False)
        try:
            if inspect.iscoroutinefunction(fn):
                value = await fn(*args)
            else:
                value = await to_thread.run_sync(partial(fn, *args), abandon_on_cancel=True)
                if inspect.isawaitable(value):
                    value = await value
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            raise HookError(assistant.id, hook, _describe(exc)) from exc
        return HookOutcome(defined=True, value=value)

    async def _invoke_ts(self, assistant: Assistant, hook: str, *args: Any) -> HookOutcome:
        try:
            outcome = await self.ts.invoke(assistant, hook, *args)
        except TsRuntimeError as exc:
            raise HookError(assistant.id, hook, str(exc)) from None
        value = outcome.value
        known = {"create": CreateResult.model_fields, "next": NextResult.model_fields}.get(hook)
        dropped: tuple[str, ...] = ()
        if known is not None and isinstance(value, dict):
            # Yao's hooks may return keys no Cage result has: dropped, and named to the client.
            dropped = tuple(sorted(set(value) - set(known)))
            if dropped:
                log.info("hooks.ts_keys_dropped", assistant=assistant.id, hook=hook, keys=list(dropped))
            value = {k: v for k, v in value.items() if k in known}
        return HookOutcome(defined=outcome.defined, value=value, dropped=dropped)

    async def defines(self, assistant: Assistant, hook: str) -> bool:
        """Whether the assistant's hooks define `hook` (`create`, `next`), without calling it.

        Python hooks are looked up in the imported module; TypeScript ones by name in
        `src/index.ts` (`function Next`, `Next = ...`), as Yao finds them.

        Raises:
            HookError: the Python module does not load.
        """
        if assistant.hooks_path is None:
            return False
        if assistant.hooks_language == "typescript":
            name = hook[:1].upper() + hook[1:]
            source = await anyio.Path(assistant.hooks_path).read_text(encoding="utf-8", errors="replace")
            pattern = rf"\bfunction\s+{name}\s*\(|\b{name}\s*[=:]\s*(async\b|function\b|\()"
            return re.search(pattern, source) is not None
        module = await self.module(assistant)
        return module is not None and callable(getattr(module, hook, None))

    def forget(self, assistant_id: str) -> None:
        """Drop the cached module (the next call imports the file again)."""
        cached = self._loaded.pop(assistant_id, None)
        if cached is not None:
            sys.modules.pop(cached[1].__name__, None)
