"""Hook modules are imported per assistant under unique names, and re-imported on reload."""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.dsl import AppLoader
from orchestrator.pipeline import HookModules
from tests.fakes.assistants import write_assistant

STATEFUL = """
STATE = {"name": "%s", "calls": 0}


def create(ctx, messages, options):
    STATE["calls"] += 1
    return {"metadata": {"who": STATE["name"], "calls": STATE["calls"]}}
"""


async def test_two_assistants_with_the_same_module_shape_do_not_collide(tmp_path: Path) -> None:
    write_assistant(tmp_path, "iso.one", hooks=STATEFUL % "one")
    write_assistant(tmp_path, "iso.two", hooks=STATEFUL % "two")
    loader = AppLoader(tmp_path, builtin_dir=None)
    hooks = HookModules()
    one, two = loader.get("iso.one"), loader.get("iso.two")
    first = await hooks.invoke(one, "create", None, [], {})
    second = await hooks.invoke(two, "create", None, [], {})
    again = await hooks.invoke(one, "create", None, [], {})
    assert first.value == {"metadata": {"who": "one", "calls": 1}}
    assert second.value == {"metadata": {"who": "two", "calls": 1}}
    assert again.value == {"metadata": {"who": "one", "calls": 2}}
    mod_one, mod_two = await hooks.module(one), await hooks.module(two)
    assert mod_one is not None and mod_two is not None
    assert mod_one.__name__ != mod_two.__name__
    assert sys.modules[mod_one.__name__] is mod_one
    assert not (await hooks.invoke(one, "next", None, {}, {})).defined


async def test_a_reloaded_assistant_gets_its_new_hook_code(tmp_path: Path) -> None:
    write_assistant(tmp_path, "iso.one", hooks=STATEFUL % "old")
    loader = AppLoader(tmp_path, builtin_dir=None)
    hooks = HookModules()
    assert (await hooks.invoke(loader.get("iso.one"), "create", None, [], {})).value == {
        "metadata": {"who": "old", "calls": 1}
    }
    old_module = await hooks.module(loader.get("iso.one"))
    write_assistant(tmp_path, "iso.one", hooks=STATEFUL % "new")
    assert (await hooks.invoke(loader.get("iso.one"), "create", None, [], {})).value == {
        "metadata": {"who": "old", "calls": 2}
    }  # same Assistant object: the cached module
    loader.reload("iso.one")
    assert (await hooks.invoke(loader.get("iso.one"), "create", None, [], {})).value == {
        "metadata": {"who": "new", "calls": 1}
    }
    assert old_module is not None and old_module.__name__ not in sys.modules
