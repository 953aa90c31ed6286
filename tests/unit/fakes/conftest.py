"""Fixtures: a fresh fake model server per test, and official SDK clients pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from tests.fakes.model_server import FakeModelServer

ANTHROPIC_KEY = "sk-ant-unit-test-secret-0001"
OPENAI_KEY = "sk-unit-test-secret-0002"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="127.0.0.1") as running:
        yield running


@pytest.fixture
def claude(server: FakeModelServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=server.url, api_key=ANTHROPIC_KEY, max_retries=0, timeout=anthropic.Timeout(5.0, read=2.0)
    ) as client:
        yield client


@pytest.fixture
def oai(server: FakeModelServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"{server.url}/v1", api_key=OPENAI_KEY, max_retries=0, timeout=openai.Timeout(5.0, read=2.0)
    ) as client:
        yield client
