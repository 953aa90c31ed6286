"""A hook's `ctx.sandbox.exec` on a real container runs through the one run-to-completion helper
(`orchestrator.sandbox.completion.run_to_end`): it has a time limit now, kills the command's
whole process group at it, and caps the output it keeps."""

from __future__ import annotations

import pytest

from orchestrator.pipeline.hooks.context import HookSandbox
from orchestrator.sandbox.manager import SandboxLease, SandboxManager


@pytest.fixture
def box(leased_box: tuple[SandboxManager, SandboxLease]) -> HookSandbox:
    return HookSandbox(*leased_box)


async def test_a_hook_exec_returns_what_the_command_printed(box: HookSandbox) -> None:
    result = await box.exec("echo one; echo two; echo oops >&2; exit 4")
    assert result == {"exit_code": 4, "stdout": "one\ntwo", "stderr": "oops\n", "timed_out": False}


async def test_a_hook_exec_is_killed_at_its_time_limit(box: HookSandbox) -> None:
    result = await box.exec("sleep 41 & sleep 42; echo never", timeout=1.0)
    assert result["timed_out"] is True and result["exit_code"] is None
    assert "never" not in str(result["stdout"])
    ps = await box.exec(["ps", "-eo", "args"])
    assert "sleep 41" not in str(ps["stdout"]) and "sleep 42" not in str(ps["stdout"]), ps


async def test_a_hook_exec_keeps_at_most_the_cap_and_says_so(box: HookSandbox) -> None:
    result = await box.exec("head -c 3000000 /dev/zero | tr '\\0' a | fold -w 1000")
    stdout = str(result["stdout"])
    assert result["exit_code"] == 0 and stdout.endswith("\n[output cut]")
    assert len(stdout) <= (1 << 20) + len("\n[output cut]")
