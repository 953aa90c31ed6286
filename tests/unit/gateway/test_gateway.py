"""The model gateway on real uvicorn, against the fake model server and a real MCP server.

Official SDK clients stand in for the runners (they send the token the way the CLIs do:
`x-api-key` for Anthropic, a bearer for OpenAI). The fake server records a digest of the key
it received, so each test can tell the real key arrived and the token did not.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anthropic
import anyio
import httpx
import openai
import pytest
from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, ConnectorType, McpServerSpec
from orchestrator.gateway import ModelGateway, SandboxAccess
from orchestrator.llm.mcp import McpToolset
from orchestrator.llm.tools import ToolContext
from tests.fakes.mcp_servers import HttpMcpServer
from tests.fakes.model_server import FakeModelServer

REAL_KEY = "sk-real-canary-7f3a9c"
HEADER_SECRET = "hdr-secret-41d2"


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeModelServer]:
    with FakeModelServer("text") as server:
        server.add_scenario("slow", [{"parts": [{"text": f"part {i} "} for i in range(6)], "delay": 0.12}])
        yield server


@pytest.fixture
async def gateway() -> AsyncIterator[ModelGateway]:
    gw = ModelGateway(host="127.0.0.1")
    yield gw
    await gw.aclose()


def connector(fake: FakeModelServer, kind: ConnectorType, conn_id: str = "fake.main") -> ConnectorSpec:
    base = fake.url if kind == ConnectorType.ANTHROPIC else fake.url + "/v1"
    return ConnectorSpec(
        id=conn_id,
        label=conn_id,
        type=kind,
        model="m",
        base_url=base,
        key=SecretStr(REAL_KEY),
        headers={"X-Tenant-Secret": SecretStr(HEADER_SECRET)},
    )


def host_url(access: SandboxAccess) -> str:
    """The sandbox-facing URL, as the host reaches it (tests run on the host)."""
    assert access.connector is not None
    return access.connector.base_url.replace("host.docker.internal", "127.0.0.1")


async def grant(gw: ModelGateway, conn: ConnectorSpec, sandbox: str = "sb-1", **kw: object) -> SandboxAccess:
    return await gw.grant(
        sandbox=sandbox,
        owner="alice",
        assistant_id="a.b",
        turn_id=f"turn-{sandbox}",
        connector=conn,
        **kw,  # type: ignore[arg-type]
    )


async def test_anthropic_calls_carry_the_real_key_and_headers_never_the_token(
    gateway: ModelGateway, fake: FakeModelServer
) -> None:
    access = await grant(gateway, connector(fake, ConnectorType.ANTHROPIC))
    assert access.connector is not None
    assert access.connector.key.get_secret_value() == access.token != REAL_KEY
    assert access.connector.headers == {}
    before = len(fake.requests.all())
    async with anthropic.AsyncAnthropic(
        api_key=access.token, base_url=host_url(access), max_retries=0
    ) as client:
        hi = [{"role": "user", "content": "hi"}]
        reply = await client.messages.create(model="m", max_tokens=50, messages=hi)  # type: ignore[arg-type]
        async with client.messages.stream(model="m", max_tokens=50, messages=hi) as s:  # type: ignore[arg-type]
            streamed = await s.get_final_message()
    records = fake.requests.all()[before:]
    assert [r.credential_sha256 for r in records] == [sha(REAL_KEY)] * 2
    assert all(r.headers.get("x-tenant-secret") == HEADER_SECRET for r in records)
    assert all(access.token not in r.model_dump_json() for r in records)
    usage = gateway.revoke(access)
    assert usage.input_tokens == reply.usage.input_tokens + streamed.usage.input_tokens > 0
    assert usage.output_tokens == reply.usage.output_tokens + streamed.usage.output_tokens > 0
    assert gateway.registry.owner_usage("alice").output_tokens >= usage.output_tokens


async def test_openai_session_and_responses_are_metered_from_the_stream(
    gateway: ModelGateway, fake: FakeModelServer
) -> None:
    access = await grant(gateway, connector(fake, ConnectorType.OPENAI))
    async with openai.AsyncOpenAI(api_key=access.token, base_url=host_url(access), max_retries=0) as client:
        session = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        session_usage = [c.usage async for c in session if c.usage is not None][-1]
        stream = await client.responses.create(model="m", input="hi", stream=True)
        done = [e async for e in stream if e.type == "response.completed"][-1]
    assert done.response.usage is not None
    assert fake.requests.all()[-1].credential_sha256 == sha(REAL_KEY)
    usage = gateway.revoke(access)
    assert usage.input_tokens == session_usage.prompt_tokens + done.response.usage.input_tokens
    assert usage.output_tokens == session_usage.completion_tokens + done.response.usage.output_tokens


async def test_a_token_reaches_only_its_own_connector_and_dies_with_its_turn(
    gateway: ModelGateway, fake: FakeModelServer
) -> None:
    mine = await grant(gateway, connector(fake, ConnectorType.ANTHROPIC, "fake.mine"), sandbox="sb-a")
    theirs = await grant(gateway, connector(fake, ConnectorType.ANTHROPIC, "fake.theirs"), sandbox="sb-b")
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient() as http:
        ok = await http.post(f"{host_url(mine)}/v1/messages", json=body, headers={"x-api-key": mine.token})
        assert ok.status_code == 200
        stolen = await http.post(
            f"{host_url(theirs)}/v1/messages", json=body, headers={"x-api-key": mine.token}
        )
        assert stolen.status_code == 403
        assert stolen.json()["error"]["type"] == "permission_error"
        for headers in ({}, {"x-api-key": "cage-gw-guess"}, {"authorization": "Basic " + mine.token}):
            assert (
                await http.post(f"{host_url(mine)}/v1/messages", json=body, headers=headers)
            ).status_code == 401
        gateway.revoke(mine)
        dead = await http.post(f"{host_url(mine)}/v1/messages", json=body, headers={"x-api-key": mine.token})
        assert dead.status_code == 401
        assert gateway.revoke_sandbox("sb-b") == 1
        gone = await http.post(
            f"{host_url(theirs)}/v1/messages", json=body, headers={"x-api-key": theirs.token}
        )
        assert gone.status_code == 401
    assert len(gateway.registry) == 0


async def test_paths_stay_below_the_upstream_base(gateway: ModelGateway, fake: FakeModelServer) -> None:
    access = await grant(gateway, connector(fake, ConnectorType.OPENAI))
    root = host_url(access).removesuffix("/v1")
    auth = {"authorization": f"Bearer {access.token}"}
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{root}/v1/models", headers=auth)).status_code == 200
        assert (await http.get(f"{root}/other", headers=auth)).status_code == 403
        escape = await http.get(f"{root}/v1/%2e%2e/admin", headers=auth)
        assert escape.status_code == 400
        assert (await http.get(f"{root.rsplit('/model', 1)[0]}/nothing/x", headers=auth)).status_code == 404


async def test_sse_passes_through_unbuffered(gateway: ModelGateway, fake: FakeModelServer) -> None:
    conn = connector(fake, ConnectorType.ANTHROPIC).model_copy(update={"model": "m@slow"})
    access = await grant(gateway, conn)
    body = {
        "model": "m@slow",
        "max_tokens": 50,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    async with httpx.AsyncClient(timeout=30) as http:
        started = time.monotonic()
        async with http.stream(
            "POST", f"{host_url(access)}/v1/messages", json=body, headers={"x-api-key": access.token}
        ) as response:
            arrivals = [time.monotonic() - started async for _ in response.aiter_raw()]
    first, last = arrivals[0], arrivals[-1]
    assert last > 1.5, arrivals  # the fake spaces its events 0.12 s apart
    assert first < 0.6 < last - 0.6, (
        arrivals
    )  # the first event left the gateway long before the upstream was done
    assert len(arrivals) >= 5


async def test_an_unreachable_upstream_is_a_502_without_secrets(gateway: ModelGateway) -> None:
    conn = ConnectorSpec(
        id="gone",
        label="gone",
        type=ConnectorType.ANTHROPIC,
        model="m",
        base_url="http://127.0.0.1:9",
        key=SecretStr(REAL_KEY),
    )
    access = await grant(gateway, conn)
    async with httpx.AsyncClient() as http:
        reply = await http.post(
            f"{host_url(access)}/v1/messages", json={}, headers={"x-api-key": access.token}
        )
    assert reply.status_code == 502
    assert REAL_KEY not in reply.text and access.token not in reply.text


async def test_http_mcp_servers_get_their_token_from_the_gateway(
    gateway: ModelGateway, tmp_path: Path
) -> None:
    with HttpMcpServer(tmp_path, token="mcp-real-token-93b1") as server:
        spec = McpServerSpec(
            id="calc",
            transport="http",
            url=server.url,
            headers={"Authorization": "Bearer mcp-real-token-93b1"},
        )
        access = await gateway.grant(
            sandbox="sb-m", owner="alice", assistant_id="a.b", turn_id="t", connector=None, mcp_servers=[spec]
        )
        (inside,) = access.mcp_servers
        assert "mcp-real-token" not in inside.model_dump_json() + str(inside.headers)
        host_side = inside.model_copy(update={"url": inside.url.replace("host.docker.internal", "127.0.0.1")})
        async with McpToolset.open([host_side]) as toolset:
            add = next(t for t in toolset.tools if t.name.endswith("add"))
            result = await add.run(
                {"a": 2, "b": 40}, ToolContext(session_id="s", turn_id="t", tool_call_id="c")
            )
        assert "42" in str(result)
        gateway.revoke(access)


async def test_a_client_that_leaves_ends_the_upstream_request(
    gateway: ModelGateway, fake: FakeModelServer
) -> None:
    fake.add_scenario("stuck", [{"text": "never ends", "hang_after": 2, "keepalive": 1}])
    conn = connector(fake, ConnectorType.ANTHROPIC).model_copy(update={"model": "m@stuck"})
    access = await grant(gateway, conn)
    body = {
        "model": "m@stuck",
        "max_tokens": 5,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    url, headers = f"{host_url(access)}/v1/messages", {"x-api-key": access.token}
    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream("POST", url, json=body, headers=headers) as reply,
    ):
        async for _ in reply.aiter_raw():
            break  # one event, then the client goes away; the fake would send keep-alives forever
    with anyio.fail_after(5):
        while access.grant.requests == 0:  # noqa: ASYNC110 - polling the grant's counter
            await anyio.sleep(0.05)
    assert access.grant.requests == 1  # the relay ended (upstream closed) without waiting for the upstream


async def test_a_request_sent_right_after_start_is_answered(gateway: ModelGateway) -> None:
    address = await gateway.start()
    async with httpx.AsyncClient() as http:
        reply = await http.post(
            f"http://127.0.0.1:{address.port}/v1/messages", json={}, headers={"x-api-key": "no-such-token"}
        )
    assert reply.status_code == 404 and "not_found_error" in reply.text  # the gateway itself answered


async def test_a_request_to_the_bound_port_waits_for_the_server_and_is_answered(
    gateway: ModelGateway,
) -> None:
    address = await gateway.bind()  # the server is still setting up: the connection waits in the backlog
    async with httpx.AsyncClient() as http:
        reply = await http.post(
            f"http://127.0.0.1:{address.port}/v1/messages", json={}, headers={"x-api-key": "no-such-token"}
        )
    assert reply.status_code == 404 and "not_found_error" in reply.text
    assert (await gateway.start()).port == address.port  # the same server


async def test_a_gateway_closed_while_setting_up_starts_again(gateway: ModelGateway) -> None:
    bound = await gateway.bind()
    await gateway.aclose()  # before its task even ran
    assert gateway.address is None
    with pytest.raises(OSError):  # its socket is closed, not left listening
        await anyio.connect_tcp("127.0.0.1", bound.port)
    address = await gateway.start()
    async with httpx.AsyncClient() as http:
        reply = await http.post(f"http://127.0.0.1:{address.port}/v1/messages", json={})
    assert reply.status_code in (401, 404)  # the gateway itself answered


async def test_a_closed_gateway_starts_again_on_a_new_socket(
    gateway: ModelGateway, fake: FakeModelServer
) -> None:
    first = await gateway.start()
    await gateway.aclose()
    assert gateway.address is None
    access = await grant(gateway, connector(fake, ConnectorType.ANTHROPIC))  # starts it again
    assert gateway.address is not None and gateway.address.port != 0
    async with anthropic.AsyncAnthropic(api_key=access.token, base_url=host_url(access)) as client:
        hi = [{"role": "user", "content": "hi"}]
        reply = await client.messages.create(model="m", max_tokens=16, messages=hi)  # type: ignore[arg-type]
    assert reply.content and first.port != 0
