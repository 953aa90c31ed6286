"""The OpenAI-compatible surface with the official `openai` client, and the native SSE stream."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.unit.api.conftest import Served


def client_for(served: Served, who: str = "alice") -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url + "/v1", api_key=served.keys[who], max_retries=0)


def test_models_list_the_assistants(served: Served) -> None:
    models = client_for(served).models.list()
    ids = [m.id for m in models.data]
    assert "tests.echo" in ids and "tests.box" in ids
    assert all(m.object == "model" for m in models.data)


def test_non_streamed_answer_with_usage(served: Served) -> None:
    answer = client_for(served).chat.completions.create(
        model="tests.echo", messages=[{"role": "user", "content": "hello there"}]
    )
    assert answer.choices[0].message.content == "echo: hello there"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (11, 17)
    assert answer.usage.total_tokens == 28


def test_streamed_answer_with_usage_and_session_continuity(served: Served) -> None:
    client = client_for(served)
    with client.chat.completions.with_streaming_response.create(
        model="tests.echo",
        messages=[{"role": "user", "content": "streamed"}],
        stream=True,
        stream_options={"include_usage": True},
    ) as response:
        session_id = response.headers["x-cage-session-id"]
        chunks = list(response.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    usage = [c.usage for c in chunks if c.usage is not None]
    assert text == "echo: streamed"
    assert finish == ["stop"]
    assert len(usage) == 1 and usage[0].prompt_tokens == 8 and usage[0].completion_tokens == 14
    again = client.chat.completions.create(
        model="tests.echo",
        messages=[{"role": "user", "content": "second"}],
        extra_headers={"X-Cage-Session-Id": session_id},
    )
    by_metadata = client.chat.completions.create(
        model="tests.echo",
        messages=[{"role": "user", "content": "third"}],
        metadata={"session_id": session_id},
    )
    assert again.choices[0].message.content == "echo: second"
    assert by_metadata.choices[0].message.content == "echo: third"
    with httpx.Client(base_url=served.url, headers=served.auth("alice")) as http:
        session = http.get(f"/v1/sessions/{session_id}").json()
        events = http.get(f"/v1/sessions/{session_id}/events").json()["events"]
    ends = [e for e in events if e["type"] == "event" and e["props"]["event"] == "stream_end"]
    assert session["assistant_id"] == "tests.echo" and len(ends) == 3


def test_errors_reach_the_official_client(served: Served) -> None:
    client = client_for(served)
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="no.such", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.UnprocessableEntityError) as bad:
        client.chat.completions.create(model="tests.echo", messages=[])
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=served.url + "/v1", api_key="wrong", max_retries=0).models.list()
    assert "no.such" in str(missing.value)
    assert "body.messages" in str(bad.value)


def test_a_failed_turn_streams_an_error_then_done(served: Served) -> None:
    with httpx.Client(base_url=served.url, headers=served.auth("alice")) as http:
        body = {"model": "tests.echo", "messages": [{"role": "user", "content": "fail"}], "stream": True}
        text = http.post("/v1/chat/completions", json=body).text
        failed = http.post("/v1/chat/completions", json={**body, "stream": False})
    answer = failed.json()
    assert failed.status_code == 502  # a failed turn is not a 200 with finish_reason stop
    assert failed.headers["x-should-retry"] == "false"  # an OpenAI client must not run it again
    assert answer["error"]["message"] == "scripted failure"
    frames = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    assert json.loads(frames[0])["error"]["message"] == "scripted failure"
    assert answer["cage_error"]["message"] == "scripted failure"
    assert answer["choices"][0]["cage_status"] == "error"


async def test_interrupt_a_turn_by_id(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("alice"), timeout=10) as http:
        body = {
            "model": "tests.echo",
            "messages": [{"role": "user", "content": "slow 100 0.05"}],
            "stream": True,
        }
        async with http.stream("POST", "/v1/chat/completions", json=body) as response:
            turn_id = response.headers["x-cage-turn-id"]
            by_bob = await http.post(
                f"/v1/chat/completions/{turn_id}/interrupt", headers=served.auth("bob"), json={}
            )
            stopped = await http.post(f"/v1/chat/completions/{turn_id}/interrupt", json={"force": False})
            text = (await response.aread()).decode()
        gone = await http.post(f"/v1/chat/completions/{turn_id}/interrupt")
    assert by_bob.status_code == 404
    assert stopped.status_code == 202 and stopped.json()["turn_id"] == turn_id
    assert '"cage_status":"cancelled"' in text and text.rstrip().endswith("data: [DONE]")
    assert gone.status_code == 404


async def test_native_sse_stream_and_session_follow(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("alice"), timeout=10) as http:
        response = await http.post(
            "/v1/assistants/tests.echo/stream", json={"messages": [{"role": "user", "content": "native"}]}
        )
        session_id = response.headers["x-cage-session-id"]
        blocks = [b for b in response.text.split("\n\n") if b]
        events = [json.loads(b.split("data: ", 1)[1]) for b in blocks]
        ids = [int(b.split("\n")[0].removeprefix("id: ")) for b in blocks]
        async with http.stream(
            "GET", f"/v1/sessions/{session_id}/stream", headers={"Last-Event-ID": "2"}
        ) as follow:
            replay = []
            async for line in follow.aiter_lines():
                if line.startswith("data: "):
                    replay.append(json.loads(line[6:]))
                if len(replay) == len(events) - 2:
                    break
    assert response.headers["content-type"].startswith("text/event-stream")
    assert ids == [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["props"]["event"] == "stream_start" and events[-1]["props"]["event"] == "stream_end"
    assert replay == events[2:]


async def test_bad_bodies_are_422_naming_the_field(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as http:
        no_model = await http.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]}
        )
        bad_role = await http.post(
            "/v1/chat/completions",
            json={"model": "tests.echo", "messages": [{"role": "robot", "content": "x"}]},
        )
        host_path = await http.post(
            "/v1/assistants/tests.echo/stream",
            json={"messages": [{"content": "x"}], "options": {"host_workspace": "/etc"}},
        )
        not_json = await http.post(
            "/v1/chat/completions", content=b"{", headers={"content-type": "application/json"}
        )
    assert no_model.status_code == 422 and no_model.json()["error"]["param"] == "body.model"
    assert bad_role.status_code == 422
    assert bad_role.json()["error"]["param"].startswith("body.messages.0.role")
    assert host_path.status_code == 422
    assert host_path.json()["fields"][0]["loc"] == "body.options.host_workspace"
    assert not_json.status_code == 422


def test_the_official_client_sees_a_failed_completion_as_an_error_and_does_not_retry(served: Served) -> None:
    turns = served.server.app.state.api.services.turns
    before = len(turns.started)
    client = openai.OpenAI(base_url=served.url + "/v1", api_key=served.keys["alice"], max_retries=2)
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model="tests.echo", messages=[{"role": "user", "content": "fail"}])
    assert "scripted failure" in str(failed.value)
    assert len(turns.started) == before + 1  # one turn, not three


async def test_the_names_from_before_sessions_are_still_read(served: Served) -> None:
    """`X-Cage-Chat-Id` (answered with both headers), Yao's `metadata.chat_id` and a `/stream`
    body's `chat_id` all continue the session they name."""
    message = [{"role": "user", "content": "hi"}]
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("alice"), timeout=10) as http:
        by_header = await http.post(
            "/v1/chat/completions",
            json={"model": "tests.echo", "messages": message},
            headers={"X-Cage-Chat-Id": "old-client"},
        )
        by_metadata = await http.post(
            "/v1/chat/completions",
            json={"model": "tests.echo", "messages": message, "metadata": {"chat_id": "old-client"}},
        )
        by_body = await http.post(
            "/v1/assistants/tests.echo/stream", json={"messages": message, "chat_id": "old-client"}
        )
        both = await http.post(
            "/v1/assistants/tests.echo/stream",
            json={"messages": message, "chat_id": "old-client", "session_id": "old-client"},
        )
        events = (await http.get("/v1/sessions/old-client/events")).json()["events"]
    assert by_header.status_code == by_metadata.status_code == by_body.status_code == 200
    assert by_header.headers["x-cage-session-id"] == by_header.headers["x-cage-chat-id"] == "old-client"
    assert by_metadata.headers["x-cage-session-id"] == by_body.headers["x-cage-session-id"] == "old-client"
    assert both.status_code == 422  # one field under two names is refused, not guessed
    assert sum(e["type"] == "event" and e["props"]["event"] == "stream_end" for e in events) == 3
