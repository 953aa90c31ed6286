"""An assistant's `locales/<lang>.yml` apply per request (real uvicorn, real pipeline, the fake
model server records what the model got): `Accept-Language` or `?locale=` pick the name and
description `/v1/admin/assistants` shows, and a turn's `options.locale` (else its
`Accept-Language`) picks the system prompt the model gets. An unknown locale reads as the default."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from orchestrator.api import create_app
from orchestrator.settings import Settings
from tests.fakes.model_server import FakeModelServer
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys
from tests.unit.api.wsclient import SessionClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
KEY = "sk-fake-locales-key-000415"
ZH_PROMPT = "你是一个乐于助人的助手。 请简短回答。"
EN_PROMPT = "You are a helpful assistant. Answer briefly."


def _write_app(root: Path, model_url: str) -> None:
    (root / "connectors").mkdir(parents=True)
    options = {
        "model": "fake-model@text",
        "key": "$ENV.LOCALES_KEY",
        "host": model_url + "/v1",
        "max_retries": 1,
    }
    (root / "connectors" / "main.conn.yao").write_text(
        json.dumps({"label": "main", "type": "openai", "options": options})
    )
    for name in ("helper", "hooked"):
        adir = root / "assistants" / "i18n" / name
        (adir / "locales").mkdir(parents=True)
        package = {"name": "{{ title }}", "description": "{{ about }}", "connector": "main"}
        (adir / "package.yao").write_text(json.dumps(package))
        (adir / "prompts.yml").write_text("- role: system\n  content: '{{ greet }} {{ brief }}'\n")
        (adir / "locales" / "en-US.yml").write_text(
            "title: Helper\nabout: Answers questions\ngreet: You are a helpful assistant.\nbrief: Answer briefly.\n"
        )
        (adir / "locales" / "zh-CN.yml").write_text(
            "name: 助手\ndescription: 回答问题\ngreet: 你是一个乐于助人的助手。\nbrief: 请简短回答。\n"
        )
    # a Create hook's `locale` picks the prompts' locale for its turn
    (root / "assistants" / "i18n" / "hooked" / "src").mkdir()
    (root / "assistants" / "i18n" / "hooked" / "src" / "index.py").write_text(
        "async def create(ctx, messages, options):\n    return {'locale': 'zh-CN'}\n"
    )


@pytest.fixture
def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, test_run_labels: dict[str, str]
) -> Iterator[tuple[ServerThread, dict[str, str], FakeModelServer]]:
    with FakeModelServer("text", host="127.0.0.1") as model:
        _write_app(tmp_path / "app", model.url)
        monkeypatch.setenv("LOCALES_KEY", KEY)
        settings = Settings(
            app_dir=tmp_path / "app",
            data_dir=tmp_path / "data",
            bootstrap_admin_key=BOOTSTRAP_KEY,
            reaper_interval=3600.0,
            sandbox_labels=test_run_labels,  # else its start-up reconcile removes every oneshot box on the engine
        )
        keys = create_keys(settings, {"admin": ("admin", "ops"), "dev": ("user", "dev")})
        server = ServerThread(create_app(settings)).start(timeout=60)
        try:
            yield server, keys, model
        finally:
            server.stop(timeout=60)


def _listed(server: ServerThread, token: str, **kwargs: Any) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
    response = httpx.get(f"{server.base_url}/v1/admin/assistants", headers=headers, timeout=60, **kwargs)
    assert response.status_code == 200, response.text
    [helper] = [a for a in response.json() if a["id"] == "i18n.helper"]
    return dict(helper)


def test_the_assistants_view_is_in_the_requests_locale(
    served: tuple[ServerThread, dict[str, str], FakeModelServer],
) -> None:
    server, keys, _ = served
    zh = _listed(server, keys["admin"], headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"})
    assert (zh["name"], zh["description"]) == ("助手", "回答问题")
    assert _listed(server, keys["admin"], params={"locale": "zh-cn"})["name"] == "助手"
    default = _listed(server, keys["admin"])
    assert (default["name"], default["description"]) == ("Helper", "Answers questions")
    unknown = _listed(server, keys["admin"], headers={"Accept-Language": "fr-FR"})
    assert (unknown["name"], unknown["description"]) == ("Helper", "Answers questions")
    one = httpx.get(
        f"{server.base_url}/v1/admin/assistants/i18n.helper",
        headers={"Authorization": f"Bearer {keys['admin']}", "Accept-Language": "zh-CN"},
        timeout=60,
    ).json()
    assert one["name"] == "助手"


def _turn(
    server: ServerThread,
    token: str,
    session_id: str,
    *,
    locale: str | None = None,
    language: str | None = None,
    assistant: str = "i18n.helper",
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    if language:
        headers["Accept-Language"] = language
    body: dict[str, Any] = {"session_id": session_id, "messages": [{"role": "user", "content": "hi"}]}
    if locale:
        body["options"] = {"locale": locale}
    response = httpx.post(
        f"{server.base_url}/v1/assistants/{assistant}/stream", json=body, headers=headers, timeout=120
    )
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    assert response.status_code == 200 and events, response.text
    assert events[-1]["props"]["status"] == "completed", events[-1]


def test_a_turn_sends_the_system_prompt_in_the_requests_locale(
    served: tuple[ServerThread, dict[str, str], FakeModelServer],
) -> None:
    server, keys, model = served
    cases = [
        ("zh", {"locale": "zh-cn"}, ZH_PROMPT),
        ("header", {"language": "zh-CN"}, ZH_PROMPT),
        ("field-wins", {"locale": "en-us", "language": "zh-CN"}, EN_PROMPT),
        ("unknown", {"locale": "fr"}, EN_PROMPT),
        ("none", {}, EN_PROMPT),
        ("hook", {"assistant": "i18n.hooked"}, ZH_PROMPT),
    ]
    for session_id, how, expected in cases:
        before = len(model.requests.all())
        _turn(server, keys["dev"], f"loc-{session_id}", **how)
        [request] = [r for r in model.requests.all()[before:] if r.api == "openai-chat"]
        system = request.body["messages"][0]
        assert system == {"role": "system", "content": expected}, (session_id, system)
        assert "{{" not in json.dumps(request.body, ensure_ascii=False)


def test_an_openai_completion_takes_its_locale_from_metadata_or_the_header(
    served: tuple[ServerThread, dict[str, str], FakeModelServer],
) -> None:
    server, keys, model = served
    cases = [
        ({"metadata": {"locale": "zh-cn"}}, {}, ZH_PROMPT),
        ({}, {"Accept-Language": "zh-CN"}, ZH_PROMPT),
        ({"metadata": {"locale": "fr"}}, {}, EN_PROMPT),
    ]
    for body, headers, expected in cases:
        before = len(model.requests.all())
        response = httpx.post(
            f"{server.base_url}/v1/chat/completions",
            json={"model": "i18n.helper", "messages": [{"role": "user", "content": "hi"}], **body},
            headers={"Authorization": f"Bearer {keys['dev']}", **headers},
            timeout=120,
        )
        assert response.status_code == 200, response.text
        [request] = [r for r in model.requests.all()[before:] if r.api == "openai-chat"]
        assert request.body["messages"][0] == {"role": "system", "content": expected}, (body, headers)


async def test_a_websocket_turn_takes_the_handshakes_accept_language(
    served: tuple[ServerThread, dict[str, str], FakeModelServer],
) -> None:
    server, keys, model = served
    for session_id, language, expected in (
        ("ws-zh", "zh-CN,zh;q=0.9", ZH_PROMPT),
        ("ws-none", None, EN_PROMPT),
    ):
        headers = {"Authorization": f"Bearer {keys['dev']}"}
        if language:
            headers["Accept-Language"] = language
        url = f"{server.ws_url}/v1/sessions/{session_id}/ws?assistant_id=i18n.helper"
        ws = SessionClient(await connect(url, additional_headers=headers))
        await ws.control("session.ready")
        before = len(model.requests.all())
        await ws.send(type="user_message", text="hi")
        await ws.control("session.accepted")
        end = await asyncio.wait_for(ws.until_stream_end(), 120)
        await ws.close()
        assert end["props"]["status"] == "completed", end  # type: ignore[index]
        [request] = [r for r in model.requests.all()[before:] if r.api == "openai-chat"]
        assert request.body["messages"][0] == {"role": "system", "content": expected}, session_id
