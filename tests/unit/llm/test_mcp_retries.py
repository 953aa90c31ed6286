"""The pure parts of LLM-mode MCP support: the retry guard, tool names, result text, the digest."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import mcp.types as mt
import pytest
from pydantic import JsonValue

from orchestrator.llm import ChatMessage, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.llm import mcp as llm_mcp
from orchestrator.llm.mcp import GuardedToolBox, RetryGuard, failure, handoff_digest, result_text, tool_name
from orchestrator.llm.tools import ToolContext, ToolResult


def ctx(call_id: str) -> ToolContext:
    return ToolContext(session_id="s", turn_id="t", tool_call_id=call_id)


class Scripted:
    """A tool that returns the results it is given, in order."""

    read_only = True
    description = "scripted"

    def __init__(self, name: str, results: list[ToolResult]) -> None:
        self.name = name
        self._results = list(results)

    @property
    def input_schema(self) -> dict[str, Any]:
        return {"type": "object"}

    async def run(self, args: Mapping[str, JsonValue], ctx: ToolContext) -> ToolResult:
        return self._results.pop(0)


# -- RetryGuard ---------------------------------------------------------------------------------


def test_consecutive_retryable_failures_trip_at_the_limit() -> None:
    guard = RetryGuard(3)
    for n in (1, 2):
        noted = guard.record("t", f"c{n}", failure("transport", "connection refused"))
        assert guard.tripped is None
        assert noted.metadata["attempt"] == n and f"Attempt {n} of 3 failed" in noted.output
    last = guard.record("t", "c3", failure("timeout", "timed out after 5s\nmore detail"))
    assert "no attempts left" in last.output
    assert guard.tripped is not None
    assert (guard.tripped.tool, guard.tripped.call_id, guard.tripped.attempts) == ("t", "c3", 3)
    assert guard.tripped.reason == "tool 't' failed 3 times in a row; last error: timed out after 5s"


def test_a_success_resets_the_count_and_tools_count_separately() -> None:
    guard = RetryGuard(2)
    guard.record("a", "1", failure("tool_error", "boom"))
    guard.record("b", "2", failure("tool_error", "boom"))
    ok = guard.record("a", "3", ToolResult(output="fine"))
    assert ok.output == "fine" and guard.attempts("a") == 0 and guard.attempts("b") == 1
    guard.record("a", "4", failure("tool_error", "boom"))
    assert guard.tripped is None
    guard.record("b", "5", failure("tool_error", "boom"))
    assert guard.tripped is not None and guard.tripped.tool == "b"


@pytest.mark.parametrize("kind", ["schema", "unknown_tool"])
def test_a_non_retryable_failure_trips_at_once(kind: Any) -> None:
    guard = RetryGuard(3)
    noted = guard.record("t", "c1", failure(kind, "wrong call"))
    assert "not retryable" in noted.output
    assert guard.tripped is not None and not guard.tripped.retryable
    assert "not retryable: wrong call" in guard.tripped.reason


def test_an_error_without_metadata_counts_as_retryable_and_zero_means_one_attempt() -> None:
    guard = RetryGuard(0)
    assert guard.limit == 1
    guard.record("t", "c1", ToolResult.error("plain failure"))
    assert guard.tripped is not None and guard.tripped.retryable


def test_failure_tags_kind_retryability_and_server() -> None:
    assert failure("transport", "x", server="s").metadata == {
        "failure": "transport",
        "retryable": True,
        "server": "s",
    }
    assert failure("schema", "x").metadata == {"failure": "schema", "retryable": False}
    assert failure("protocol", "x", retryable=False).metadata["retryable"] is False


async def test_guarded_toolbox_counts_calls_and_unknown_tools() -> None:
    guard = RetryGuard(3)
    box = GuardedToolBox([Scripted("calc__add", [ToolResult.error("down"), ToolResult(output="2")])], guard)
    tool = box.get("calc__add")
    assert tool is not None and box.names == ("calc__add",)
    assert [s.name for s in box.specs()] == ["calc__add"]
    first = await tool.run({}, ctx("c1"))
    assert first.is_error and guard.attempts("calc__add") == 1
    assert (await tool.run({}, ctx("c2"))).output == "2"
    assert guard.attempts("calc__add") == 0

    unknown = box.get("calc__divide")
    assert unknown is not None
    result = await unknown.run({"a": 1}, ctx("c3"))
    assert result.is_error and result.metadata["failure"] == "unknown_tool"
    assert "available: calc__add" in result.output
    assert guard.tripped is not None and guard.tripped.tool == "calc__divide"


# -- names and results --------------------------------------------------------------------------


def test_tool_names_are_namespaced_and_provider_safe() -> None:
    assert tool_name("calc", "add") == "calc__add"
    assert tool_name("acme.web tools", "get/page") == "acme_web_tools__get_page"
    long = tool_name("s" * 40, "t" * 40)
    assert len(long) == 64 and long != tool_name("s" * 40, "t" * 41)
    assert long == tool_name("s" * 40, "t" * 40)


def test_result_text_joins_blocks_and_describes_binary_content() -> None:
    result = mt.CallToolResult(
        content=[
            mt.TextContent(type="text", text="line one"),
            mt.ImageContent(type="image", data="AAAA", mime_type="image/png"),
            mt.EmbeddedResource(
                type="resource", resource=mt.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
            mt.ResourceLink(type="resource_link", uri="file:///b.bin", name="b"),
        ]
    )
    assert result_text(result).splitlines() == [
        "line one",
        "[image: image/png, 3 bytes]",
        "inside",
        "[resource link: file:///b.bin]",
    ]


def test_result_text_falls_back_to_structured_content_and_is_capped() -> None:
    structured = mt.CallToolResult(content=[], structured_content={"b": 2, "a": 1})
    assert result_text(structured) == '{"a": 1, "b": 2}'
    big = mt.CallToolResult(content=[mt.TextContent(type="text", text="x" * 500)])
    cut = result_text(big, limit=100)
    assert cut.startswith("x" * 100) and cut.endswith("[output cut: 400 more characters]")


# -- the hand-off digest ------------------------------------------------------------------------


def conversation() -> list[ChatMessage]:
    return [
        ChatMessage.user("What is 2 + 3? My key is sk-ant-abcdefghijklmnop."),
        ChatMessage(
            role="assistant",
            content=(
                TextBlock(text="Let me add."),
                ToolCallBlock(id="c1", name="calc__add", arguments={"a": 2}),
            ),
        ),
        ChatMessage(
            role="user", content=(ToolResultBlock(call_id="c1", output="missing b\ntrace", is_error=True),)
        ),
    ]


def test_the_digest_has_the_system_prompt_conversation_and_tool_results() -> None:
    digest = handoff_digest("'Calc' (`tests.calc`)", "You are Calc.", conversation(), "it failed")
    assert digest.startswith("# Hand-off from assistant 'Calc' (`tests.calc`)")
    assert "The previous attempt stopped: it failed." in digest
    sections = [line for line in digest.splitlines() if line.startswith("## ")]
    assert sections == ["## System prompt", "## Conversation", "## Tool results"]
    assert "```\nYou are Calc.\n```" in digest
    assert '**Assistant called** `calc__add` with `{"a": 2}`' in digest
    assert "**Tool error** (`calc__add`):" in digest
    assert "1. `calc__add` — error: missing b" in digest
    assert "sk-ant-abcdefghijklmnop" not in digest  # secrets masked


def test_the_digest_is_bounded() -> None:
    messages = [ChatMessage.user(f"m{n}") for n in range(60)] + [ChatMessage.user("x" * 5000)]
    digest = handoff_digest("a", "", messages, "why")
    assert "_(none)_" in digest and "_(21 earlier messages left out)_" in digest
    assert "m59" in digest and "m19" not in digest
    assert "x" * 2000 + " … [3000 more characters]" in digest
    assert "_(no tool ran)_" in digest


def test_exports_are_sorted_and_complete() -> None:
    public = sorted(n for n, v in vars(llm_mcp).items() if not n.startswith("_") and not inspect.ismodule(v))
    assert llm_mcp.__all__ == public
