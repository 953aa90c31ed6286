"""`RequestRecord.tool_results()`: what a client sent back to the model, in every API's shape."""

from __future__ import annotations

from typing import Any

from tests.fakes.model_server.request_log import RequestRecord


def _record(api: str, body: dict[str, Any]) -> RequestRecord:
    return RequestRecord(seq=1, method="POST", path="/", headers={}, body=body, api=api)


def test_anthropic_tool_result_blocks_as_text() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "refused: no", "is_error": True},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "content": [{"type": "text", "text": "blue"}],
                    },
                ],
            },
        ]
    }
    assert _record("anthropic", body).tool_results() == ["refused: no", "blue"]


def test_session_tool_messages_and_responses_outputs() -> None:
    session = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
        ]
    }
    assert _record("openai-chat", session).tool_results() == ["ok"]
    responses = {
        "input": [
            {"role": "user", "content": "go"},
            {"type": "function_call_output", "call_id": "c", "output": "denied"},
            {"type": "custom_tool_call_output", "call_id": "d", "output": "patched"},
        ]
    }
    assert _record("openai-responses", responses).tool_results() == ["denied", "patched"]
    assert _record("models", {}).tool_results() == []
