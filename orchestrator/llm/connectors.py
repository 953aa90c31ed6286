"""From a DSL `ConnectorSpec` to a `ModelClient` and the request options it implies."""

from __future__ import annotations

from orchestrator.dsl.connectors import ConnectorSpec, ConnectorType
from orchestrator.llm.client import DEFAULT_RETRIES, DEFAULT_TIMEOUT, ClientSettings, ModelClient
from orchestrator.llm.messages import ModelOptions


def client_settings(connector: ConnectorSpec) -> ClientSettings:
    """The client-side part of a connector: endpoint, key, timeout and retry budget."""
    timeout = connector.timeout.total_seconds() if connector.timeout is not None else DEFAULT_TIMEOUT
    return ClientSettings(
        provider=connector.type.value,
        model=connector.model,
        base_url=connector.base_url,
        key=connector.key,
        timeout=timeout,
        max_retries=connector.max_retries if connector.max_retries is not None else DEFAULT_RETRIES,
        headers=dict(connector.headers),
    )


def model_options(connector: ConnectorSpec) -> ModelOptions:
    """The request knobs a connector sets: `max_tokens`, `temperature`, `thinking`."""
    thinking = connector.thinking is not None and connector.thinking.type == "enabled"
    budget = connector.thinking.budget_tokens if connector.thinking else None
    max_tokens = connector.max_tokens or (max(8192, (budget or 0) + 4096) if thinking else 4096)
    return ModelOptions(
        max_tokens=max_tokens,
        temperature=connector.temperature,
        thinking=thinking,
        thinking_budget=budget or 2048,
    )


def client_for(connector: ConnectorSpec | ClientSettings) -> ModelClient:
    """The `ModelClient` for a connector (`anthropic` -> Messages API, `openai` -> Chat Completions)."""
    settings = connector if isinstance(connector, ClientSettings) else client_settings(connector)
    # Each SDK is imported when a connector of its kind is used, never on start-up (issue 14).
    if settings.provider == ConnectorType.ANTHROPIC.value:
        from orchestrator.llm.anthropic_client import AnthropicClient

        return AnthropicClient(settings)
    from orchestrator.llm.openai_client import OpenAIClient

    return OpenAIClient(settings)
