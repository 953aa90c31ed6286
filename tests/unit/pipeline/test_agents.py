"""Agent-to-agent calls from hooks: forked, threaded, and `any`/`race` cancel the losers."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.fakes.assistants import write_assistant
from tests.pipeline_rig import Ran, Rig


async def fan_out(rig: Rig, method: str, calls: list[dict[str, Any]], **kw: Any) -> tuple[Ran, Any]:
    ran = await rig.run("hooks.fanout", json.dumps({"method": method, "calls": calls}), **kw)
    assert ran.result.status == "completed", ran.result.error
    return ran, json.loads(ran.result.content)


async def test_call_streams_into_the_parent_under_its_thread(rig: Rig) -> None:
    ran, result = await fan_out(rig, "call", [{"agent_id": "hooks.echo", "messages": "ping"}])
    assert result["agent_id"] == "hooks.echo"
    assert result["content"] == "echo: ping"
    assert result["error"] is None
    assert result["response"]["status"] == "completed"
    thread = ran.thread_of("hooks.echo")
    assert ran.texts(thread) == ["echo: ping"]
    assert ran.starts()[thread].metadata == {"depth": 1, "kind": "fork"}


async def test_all_returns_every_result_in_order(rig: Rig) -> None:
    calls = [
        {"agent_id": "hooks.echo", "messages": "one"},
        {"agent_id": "hooks.failing", "messages": "two"},
        {"agent_id": "hooks.echo", "messages": [{"role": "user", "content": "three"}]},
    ]
    ran, results = await fan_out(rig, "all", calls)
    assert [r["content"] for r in results] == ["echo: one", "", "echo: three"]
    assert "LookupError: failing on purpose" in results[1]["error"]
    assert len([t for t in ran.ends() if t is not None]) == 3


async def test_race_returns_the_first_result_and_cancels_the_slow_call(rig: Rig) -> None:
    started = time.monotonic()
    calls = [{"agent_id": "hooks.slow", "messages": "s"}, {"agent_id": "hooks.fast", "messages": "f"}]
    ran, result = await fan_out(rig, "race", calls)
    assert time.monotonic() - started < 10  # the slow hook sleeps 30 s: it was not waited for
    assert result["agent_id"] == "hooks.fast" and result["content"] == "fast done"
    slow = ran.thread_of("hooks.slow")
    assert ran.ends()[slow].status == "cancelled"
    assert ran.texts(slow) == ["slow started"]


async def test_any_skips_failures_and_cancels_the_rest(rig: Rig) -> None:
    calls = [
        {"agent_id": "hooks.failing", "messages": "x"},
        {"agent_id": "hooks.slow", "messages": "s"},
        {"agent_id": "hooks.fast", "messages": "f"},
    ]
    ran, result = await fan_out(rig, "any", calls)
    assert result["agent_id"] == "hooks.fast"
    assert ran.ends()[ran.thread_of("hooks.failing")].status == "error"
    assert ran.ends()[ran.thread_of("hooks.slow")].status == "cancelled"


async def test_forked_calls_skip_history(rig: Rig, app_root: Path) -> None:
    write_assistant(
        app_root,
        "hooks.count",
        hooks="async def create(ctx, messages, options):\n    await ctx.send(str(len(messages)))\n",
    )
    await rig.run("hooks.echo", "first", session_id="chat-h")
    direct = await rig.run("hooks.count", "second", session_id="chat-h")
    assert direct.result.content == "3"  # two messages of history and the new one
    _, result = await fan_out(
        rig, "call", [{"agent_id": "hooks.count", "messages": "x"}], session_id="chat-h"
    )
    assert result["content"] == "1"


async def test_unknown_agent_is_an_error_result_not_a_crash(rig: Rig) -> None:
    _, result = await fan_out(rig, "call", [{"agent_id": "hooks.nope", "messages": "x"}])
    assert result["error"] == "assistant 'hooks.nope' not found"


async def test_interrupting_a_hook_turn_ends_it_cancelled(rig: Rig) -> None:
    turn = rig.turn("hooks.slow", "x")
    handle = await rig.service.start(turn)
    events = handle.events()
    async for event in events:
        if event.type == "text":
            break
    await events.aclose()  # type: ignore[attr-defined]
    started = time.monotonic()
    await handle.interrupt()
    result = await handle.result()
    assert result.status == "cancelled"
    assert time.monotonic() - started < 5
    assert rig.service.running(turn.session_id) is None
