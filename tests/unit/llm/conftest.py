"""Fixtures for the native loop tests: a fake model server per test and client settings for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from pydantic import SecretStr

from orchestrator.llm import ClientSettings, ModelClient, client_for
from tests.fakes.model_server import FakeModelServer

KEY = "sk-ant-llm-unit-secret-0042"
PROVIDERS = ("anthropic", "openai")


@pytest.fixture
async def server() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer("text", host="127.0.0.1") as running:
        yield running


def settings(
    server: FakeModelServer,
    provider: str = "anthropic",
    *,
    scenario: str | None = None,
    timeout: float = 10.0,
    max_retries: int = 2,
) -> ClientSettings:
    """Client settings pointing at the fake server; `scenario` picks a named script by model name."""
    return ClientSettings(
        provider=provider,
        model=f"fake@{scenario}" if scenario else "fake-model",
        base_url=server.url,
        key=SecretStr(KEY),
        timeout=timeout,
        max_retries=max_retries,
    )


MakeClient = Callable[..., ModelClient]


@pytest.fixture
async def make_client(server: FakeModelServer) -> AsyncIterator[MakeClient]:
    """`make_client(provider, scenario=..., ...)`: a client on the fake server, closed after the test."""
    made: list[ModelClient] = []

    def make(provider: str = "anthropic", **kwargs: object) -> ModelClient:
        client = client_for(settings(server, provider, **kwargs))  # type: ignore[arg-type]
        made.append(client)
        return client

    yield make
    for client in made:
        await client.aclose()
