"""`LeaseToolSandbox` on a real container: files through the sandbox user, kills on timeout/cancel."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.errors import ToolError
from orchestrator.pipeline.modes.sandbox_tools import LeaseToolSandbox
from orchestrator.sandbox.manager import SandboxLease, SandboxManager


@pytest.fixture
def tools(leased_box: tuple[SandboxManager, SandboxLease]) -> LeaseToolSandbox:
    return LeaseToolSandbox(*leased_box)


async def _ps(tools: LeaseToolSandbox) -> str:
    return (await tools.exec(["ps", "-eo", "args"], timeout=10)).stdout


async def test_files_round_trip_as_the_sandbox_user(tools: LeaseToolSandbox) -> None:
    data = b"\x00binary\xff\nno final newline"
    await tools.write_file("deep/er/blob.bin", data)
    assert await tools.read_file("deep/er/blob.bin") == data
    await tools.write_file("empty.txt", b"")
    assert await tools.read_file("empty.txt") == b""
    owner = await tools.exec(["stat", "-c", "%U", "deep/er/blob.bin", "deep"], timeout=10)
    assert owner.stdout.split() == ["sandbox", "sandbox"]


async def test_missing_files_directories_and_symlinks_out_are_refused(tools: LeaseToolSandbox) -> None:
    with pytest.raises(ToolError, match="no such file"):
        await tools.read_file("nope.txt")
    await tools.write_file("dir/a.txt", b"a")
    with pytest.raises(ToolError, match="is a directory"):
        await tools.read_file("dir")
    setup = await tools.exec(["sh", "-c", "ln -s /etc/passwd pw && ln -s /tmp out"], timeout=10)
    assert setup.exit_code == 0, setup.stderr
    with pytest.raises(ToolError, match="outside the workspace"):
        await tools.read_file("pw")
    with pytest.raises(ToolError, match="outside the workspace"):
        await tools.write_file("out/escaped.txt", b"x")
    assert (await tools.exec(["test", "-e", "/tmp/escaped.txt"], timeout=10)).exit_code == 1


async def test_output_is_capped_and_streams_stay_apart(tools: LeaseToolSandbox) -> None:
    result = await tools.exec(
        ["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' a; echo oops >&2; exit 3"],
        timeout=10,
        max_output=1000,
    )
    assert result.exit_code == 3 and result.truncated and not result.timed_out
    assert len(result.stdout) == 1000 and set(result.stdout) == {"a"}
    assert result.stderr == "oops\n"


async def test_a_timeout_kills_the_whole_process_group(tools: LeaseToolSandbox) -> None:
    result = await tools.exec(["sh", "-c", "sleep 31 & sleep 32; echo never"], timeout=1.0)
    assert result.timed_out and result.exit_code is None and "never" not in result.stdout
    ps = await _ps(tools)
    assert "sleep 31" not in ps and "sleep 32" not in ps, ps


async def test_a_cancelled_call_kills_its_command(tools: LeaseToolSandbox) -> None:
    with anyio.move_on_after(1.5):
        await tools.exec(["sh", "-c", "sleep 33 & sleep 34"], timeout=60)
    ps = await _ps(tools)
    assert "sleep 33" not in ps and "sleep 34" not in ps, ps
