"""Failure injection: error statuses and retry headers, cut and hanging streams, delays."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from tests.fakes.model_server import FakeModelServer

PROMPT: Any = [{"role": "user", "content": "hi"}]


def test_500_then_success_is_retried_by_the_sdk(server: FakeModelServer) -> None:
    server.add_scenario(
        "flaky", [{"text": "recovered", "fail_status": 500, "fail_times": 1, "retry_after_ms": 10}]
    )
    with anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=2) as client:
        message = client.messages.create(model="scenario:flaky", max_tokens=10, messages=PROMPT)
    assert message.content[0].text == "recovered"  # type: ignore[union-attr]
    assert [r.status for r in server.requests] == [500, 200]
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]


def test_fail_times_is_counted_per_step_and_can_be_reset(server: FakeModelServer) -> None:
    server.add_scenario("once", [{"text": "ok", "fail_status": 503, "fail_times": 1}])
    body = {"model": "scenario:once", "max_tokens": 5, "messages": PROMPT}
    statuses = [httpx.post(f"{server.url}/v1/messages", json=body).status_code for _ in range(3)]
    server.reset_failures()
    statuses.append(httpx.post(f"{server.url}/v1/messages", json=body).status_code)
    assert statuses == [503, 200, 200, 503]


def test_401_with_should_retry_false_is_not_retried(server: FakeModelServer) -> None:
    with (
        anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=3) as client,
        pytest.raises(anthropic.AuthenticationError) as caught,
    ):
        client.messages.create(model="scenario:error401", max_tokens=10, messages=PROMPT)
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "fake failure 401 (scenario error401, step 0)"},
    }
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert len(server.requests) == 1


def test_500_forever_exhausts_retries(server: FakeModelServer) -> None:
    server.add_scenario("down", [{"text": "x", "fail_status": 500, "retry_after_ms": 1}])
    with (
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=2) as client,
        pytest.raises(openai.InternalServerError) as caught,
    ):
        client.chat.completions.create(model="scenario:down", messages=PROMPT)
    assert caught.value.body == {
        "message": "fake failure 500 (scenario down, step 0)",
        "type": "server_error",
        "param": None,
        "code": "500",
    }
    assert len(server.requests) == 3


def test_429_honours_retry_after_ms(server: FakeModelServer) -> None:
    server.add_scenario(
        "limited", [{"text": "finally", "fail_status": 429, "fail_times": 2, "retry_after_ms": 300}]
    )
    raw = httpx.post(f"{server.url}/v1/responses", json={"model": "scenario:limited", "input": "x"})
    assert raw.status_code == 429
    assert raw.headers["retry-after-ms"] == "300"
    assert raw.headers["retry-after"] == "1"
    started = time.monotonic()
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=3) as client:
        response = client.responses.create(model="scenario:limited", input="x")
    assert response.output_text == "finally"
    # One wait of at least the 300 ms the header asked for (a lower bound only: load lengthens it).
    assert time.monotonic() - started >= 0.3
    assert [r.status for r in server.requests] == [429, 429, 200]


def test_cut_after_drops_the_stream_mid_way(server: FakeModelServer, claude: anthropic.Anthropic) -> None:
    server.add_scenario("cut", [{"text": "a long answer with many words in it", "cut_after": 4}])
    seen: list[str] = []
    with pytest.raises(httpx2.RemoteProtocolError):
        for event in claude.messages.create(
            model="scenario:cut", max_tokens=10, messages=PROMPT, stream=True
        ):
            seen.append(event.type)
    assert "message_stop" not in seen
    assert seen[0] == "message_start"


def test_cut_after_non_streaming_raises_connection_error(
    server: FakeModelServer, claude: anthropic.Anthropic
) -> None:
    server.add_scenario("cut", [{"text": "answer", "cut_after": 0}])
    with pytest.raises(anthropic.APIConnectionError):
        claude.messages.create(model="scenario:cut", max_tokens=10, messages=PROMPT)


def test_hang_after_lets_the_client_read_timeout_fire(server: FakeModelServer) -> None:
    server.add_scenario("stall", [{"text": "never finishes here", "hang_after": 2}])
    chunks: list[Any] = []
    started = time.monotonic()
    with (
        openai.OpenAI(
            base_url=f"{server.url}/v1", api_key="k", max_retries=0, timeout=openai.Timeout(5.0, read=0.5)
        ) as client,
        pytest.raises((openai.APITimeoutError, httpx2.ReadTimeout)),
    ):
        for chunk in client.chat.completions.create(model="scenario:stall", messages=PROMPT, stream=True):
            chunks.append(chunk)
    assert len(chunks) == 2
    assert 0.5 <= time.monotonic() - started < 3.0


def test_hanging_stream_sends_keepalive_comments_until_stop() -> None:
    server = FakeModelServer([{"text": "x", "hang_after": 1, "keepalive": 0.1}], host="127.0.0.1").start()
    body = {"model": "m", "max_tokens": 5, "messages": PROMPT, "stream": True}
    lines: list[str] = []
    try:
        with httpx.stream("POST", f"{server.url}/v1/messages", json=body, timeout=2.0) as response:
            for line in response.iter_lines():
                lines.append(line)
                if lines.count(": keep-alive") == 2:
                    break
    finally:
        started = time.monotonic()
        server.stop()
    assert lines[:2] == ["event: message_start", lines[1]]
    assert lines[1].startswith("data: ")
    assert lines.count(": keep-alive") == 2
    assert time.monotonic() - started < 3.0


def test_hang_non_streaming_times_out(server: FakeModelServer, claude: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.APITimeoutError):
        claude.messages.create(model="scenario:hang", max_tokens=10, messages=PROMPT, timeout=0.5)


def test_delay_paces_every_event(server: FakeModelServer, oai: openai.OpenAI) -> None:
    server.add_scenario("slow", [{"text": "one two", "delay": 0.05}])
    started = time.monotonic()
    chunks = list(oai.chat.completions.create(model="scenario:slow", messages=PROMPT, stream=True))
    # role chunk, two content chunks, finish chunk (+ [DONE]): at least five delays.
    assert len(chunks) == 4
    assert time.monotonic() - started >= 0.25
