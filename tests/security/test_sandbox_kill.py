"""M14 / issue 11 item 8: cancel and turn end are a hard kill in every lifecycle.

The agent starts writers that leave the exec's process group (`setsid`, `nohup ... &`) and keep
appending to the workspace. After the turn ends (or is cancelled) `ps` in the box shows none of
them and the file stops growing; a background prepare step Cage started survives. No control
file the agent could rewrite is involved (the old pid files lived in a world-writable `/tmp`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.security.sandbox_rig import *  # noqa: F403 - the fixtures
from tests.security.sandbox_rig import request, sh, spec

pytestmark = pytest.mark.docker

WRITERS = (
    "setsid sh -c 'while :; do date +%s%N >> /workspace/late-setsid; sleep 0.1; done' >/dev/null 2>&1 < /dev/null & "
    "nohup sh -c 'while :; do date +%s%N >> /workspace/late-nohup; sleep 0.1; done' >/dev/null 2>&1 & "
    "sleep 0.5; echo started"
)
LIFECYCLES = ["session", "longrunning", "persistent"]


async def _strays(manager: Any, lease: Any) -> list[bytes]:
    lines, _, _ = await sh(manager, lease, "ps -eo pid,args | grep '[l]ate-' || true")
    return lines


async def _growing(manager: Any, lease: Any) -> bool:
    first, _, _ = await sh(manager, lease, "cat /workspace/late-* 2>/dev/null | wc -l")
    await anyio.sleep(0.6)
    second, _, _ = await sh(manager, lease, "cat /workspace/late-* 2>/dev/null | wc -l")
    return first != second


@pytest.mark.parametrize("lifecycle", LIFECYCLES)
async def test_detached_writers_are_gone_after_the_turn(make_manager: Any, tmp_path: Path, lifecycle: str) -> None:
    manager = make_manager()
    background = [{"action": "exec", "cmd": "exec sleep 3000", "background": True, "once": True}]
    req = request(tmp_path, spec(lifecycle=lifecycle, prepare=background), chat_id="k1")
    turn = await manager.acquire(req)
    assert (await sh(manager, turn, WRITERS))[0] == [b"started"]
    assert len(await _strays(manager, turn)) == 2
    await manager.release(turn)
    after = await manager.acquire(req)
    assert await _strays(manager, after) == []
    assert not await _growing(manager, after)
    lines, _, _ = await sh(manager, after, "ps -eo args | grep -c '^[s]leep 3000'")
    assert lines == [b"1"]  # Cage's own background step survives (and was not started twice)
    await manager.release(after)


@pytest.mark.parametrize("lifecycle", LIFECYCLES)
async def test_detached_writers_are_gone_after_cancel(make_manager: Any, tmp_path: Path, lifecycle: str) -> None:
    manager = make_manager()
    req = request(tmp_path, spec(lifecycle=lifecycle), chat_id="k2")
    with anyio.move_on_after(3):
        async with manager.lease(req) as lease:
            await sh(manager, lease, WRITERS + "; sleep 600")  # cancelled mid-turn
    again = await manager.acquire(req)
    assert again.ref.id == lease.ref.id
    assert await _strays(manager, again) == []
    assert not await _growing(manager, again)
    await manager.release(again)


async def test_no_world_writable_control_files(make_manager: Any, tmp_path: Path) -> None:
    manager = make_manager()
    lease = await manager.acquire(request(tmp_path, spec(lifecycle="session"), chat_id="k3"))
    lines, _, _ = await sh(manager, lease, "ls -d /tmp/.cage-exec 2>/dev/null; find / -xdev -perm -0002 -type f 2>/dev/null")
    assert lines == []
    await manager.release(lease)
