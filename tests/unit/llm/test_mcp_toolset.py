"""`McpToolset` against real MCP servers (the `calc` server, stdio and streamable HTTP)."""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.dsl import McpServerSpec
from orchestrator.errors import ToolError
from orchestrator.llm.mcp import McpTool, McpToolset
from orchestrator.llm.tools import ToolContext
from tests.fakes.mcp_servers import CALC_SCRIPT, HttpMcpServer

CTX = ToolContext(session_id="s", turn_id="t", tool_call_id="call-1")


def calc(state: Path, server_id: str = "calc", **fields: Any) -> McpServerSpec:
    return McpServerSpec(
        id=server_id,
        transport="stdio",
        command=sys.executable,
        args=(str(CALC_SCRIPT), str(state)),
        timeout=fields.pop("timeout", timedelta(seconds=10)),
        **fields,
    )


def pids(state: Path) -> list[int]:
    return [int(p) for p in (state / "pids").read_text().split()]


def assert_stopped(state: Path) -> None:
    for pid in pids(state):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def by_name(toolset: McpToolset) -> dict[str, McpTool]:
    return {t.name: t for t in toolset.tools}


async def test_stdio_tools_are_listed_and_called(tmp_path: Path) -> None:
    spec = calc(tmp_path, env={"CALC_GREETING": "Howdy"})
    async with McpToolset.open([spec]) as toolset:
        tools = by_name(toolset)
        assert sorted(tools) == [f"calc__{n}" for n in ("add", "fail", "flaky", "greet", "image", "slow")]
        add = tools["calc__add"]
        assert add.description == "Add two integers."
        assert add.input_schema["type"] == "object" and add.input_schema["required"] == ["a", "b"]
        assert "title" not in add.input_schema

        ok = await add.run({"a": 2, "b": 3}, CTX)
        assert (ok.output, ok.is_error, ok.metadata) == ("5", False, {"server": "calc"})
        greeting = await tools["calc__greet"].run({"name": "Ada"}, CTX)
        assert greeting.output == "Howdy, Ada"  # the spec's env reaches the server
        picture = await tools["calc__image"].run({}, CTX)
        assert picture.output.startswith("[image: image/png,") and not picture.is_error

        failed = await tools["calc__fail"].run({"reason": "maintenance"}, CTX)
        assert failed.is_error and "the backend is down (maintenance)" in failed.output
        assert failed.metadata == {"failure": "tool_error", "retryable": True, "server": "calc"}
        assert len(pids(tmp_path)) == 1
    assert_stopped(tmp_path)


async def test_arguments_are_checked_against_the_schema_before_the_call(tmp_path: Path) -> None:
    async with McpToolset.open([calc(tmp_path)]) as toolset:
        add = by_name(toolset)["calc__add"]
        assert add.check({"a": 1, "b": 2}) is None
        bad = await add.run({"a": "one", "b": 2}, CTX)
        assert bad.is_error and bad.metadata["failure"] == "schema" and bad.metadata["retryable"] is False
        assert "a: 'one' is not of type 'integer'" in bad.output
    assert not (tmp_path / "calls.log").exists()  # nothing reached the server


async def test_the_allowlist_narrows_the_tools(tmp_path: Path) -> None:
    async with McpToolset.open([calc(tmp_path, tools=("add", "missing"))]) as toolset:
        assert toolset.names == ("calc__add",)


async def test_a_slow_call_times_out_as_a_retryable_failure(tmp_path: Path) -> None:
    async with McpToolset.open([calc(tmp_path, timeout=timedelta(seconds=1))]) as toolset:
        slow = by_name(toolset)["calc__slow"]
        started = time.monotonic()
        result = await slow.run({"seconds": 30}, CTX)
        assert time.monotonic() - started < 5
        assert result.is_error and result.metadata["failure"] == "timeout" and result.metadata["retryable"]
        assert "timed out after 1s" in result.output
        # The connection survives a timeout.
        assert (await by_name(toolset)["calc__add"].run({"a": 1, "b": 1}, CTX)).output == "2"


async def test_a_server_that_dies_mid_turn_gives_retryable_transport_errors(tmp_path: Path) -> None:
    async with McpToolset.open([calc(tmp_path, timeout=timedelta(seconds=3))]) as toolset:
        os.kill(pids(tmp_path)[0], signal.SIGKILL)
        result = await by_name(toolset)["calc__add"].run({"a": 1, "b": 1}, CTX)
        assert result.is_error and result.metadata["retryable"] is True
        assert result.metadata["failure"] in ("transport", "protocol", "timeout")
        again = await by_name(toolset)["calc__add"].run({"a": 1, "b": 1}, CTX)
        assert again.is_error and again.metadata["retryable"] is True


async def test_a_server_that_cannot_start_names_itself_and_masks_its_stderr(tmp_path: Path) -> None:
    crash = McpServerSpec(
        id="crashy",
        transport="stdio",
        command=sys.executable,
        args=("-c", "import sys; sys.stderr.write('fatal: api_token=abcdef123456\\n'); sys.exit(3)"),
    )
    with pytest.raises(ToolError) as caught:
        async with McpToolset.open([calc(tmp_path), crash]):
            pytest.fail("the toolset opened with a dead server")
    message = str(caught.value)
    assert caught.value.tool == "mcp:crashy" and "cannot connect" in message
    assert "fatal: api_token=***" in message and "abcdef123456" not in message
    assert_stopped(tmp_path)  # the healthy server was closed again

    missing = McpServerSpec(id="ghost", transport="stdio", command="/nonexistent/server")
    with pytest.raises(ToolError, match="mcp:ghost: cannot connect: FileNotFoundError"):
        async with McpToolset.open([missing]):
            pytest.fail("opened")


async def test_the_same_server_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="configured twice"):
        async with McpToolset.open([calc(tmp_path), calc(tmp_path)]):
            pytest.fail("opened")


async def test_cancelling_the_turn_mid_call_closes_the_server(tmp_path: Path) -> None:
    started = time.monotonic()
    with anyio.move_on_after(3):
        async with McpToolset.open([calc(tmp_path)]) as toolset:
            await by_name(toolset)["calc__slow"].run({"seconds": 60}, CTX)
            pytest.fail("the call outlived the cancel scope")
    assert time.monotonic() - started < 15
    assert_stopped(tmp_path)


async def test_streamable_http_with_a_bearer_token(tmp_path: Path) -> None:
    with HttpMcpServer(tmp_path, token="http-secret-token-42") as http:
        spec = McpServerSpec(
            id="web.calc",
            transport="http",
            url=http.url,
            headers={"Authorization": "Bearer http-secret-token-42"},
        )
        async with McpToolset.open([spec]) as toolset:
            add = by_name(toolset)["web_calc__add"]
            assert (await add.run({"a": 40, "b": 2}, CTX)).output == "42"

        anonymous = spec.model_copy(update={"headers": {}})
        with pytest.raises(ToolError) as caught:
            async with McpToolset.open([anonymous]):
                pytest.fail("opened without the token")
        assert caught.value.tool == "mcp:web.calc"


async def test_an_http_server_that_is_not_there(tmp_path: Path) -> None:
    spec = McpServerSpec(
        id="gone", transport="http", url="http://127.0.0.1:9/mcp", timeout=timedelta(seconds=5)
    )
    with pytest.raises(ToolError, match="mcp:gone: cannot connect"):
        async with McpToolset.open([spec]):
            pytest.fail("opened")
