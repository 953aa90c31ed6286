"""From a DSL `ConnectorSpec` to a `ModelClient` and the request options it implies."""

from __future__ import annotations

from orchestrator.dsl.connectors import ConnectorSpec, ConnectorType
from orchestrator.dsl.package import CompactionSettings, PackageOptions
from orchestrator.llm.client import DEFAULT_RETRIES, DEFAULT_TIMEOUT, ClientSettings, ModelClient
from orchestrator.llm.compaction import CompactionPolicy
from orchestrator.llm.connections import ModelConnections
from orchestrator.llm.messages import ModelOptions, Sampling

EFFORT_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
"""Anthropic has no `reasoning_effort`: an effort becomes extended thinking with this budget."""
DEFAULT_CONTEXT_TOKENS = 128_000
"""A connector's context window when its `capabilities.max_input_tokens` does not say."""


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


def model_options(connector: ConnectorSpec, package: PackageOptions | None = None) -> ModelOptions:
    """The request knobs of a connector (`max_tokens`, `temperature`, `thinking`), with a
    package's `options` over them (the typed keys and any extra provider key).

    The loader has refused the keys the connector's provider has no field for
    (`orchestrator.dsl.option_support`), so every key given here is sent.
    """
    thinking = connector.thinking is not None and connector.thinking.type == "enabled"
    budget = connector.thinking.budget_tokens if connector.thinking else None
    max_tokens = connector.max_tokens or (max(8192, (budget or 0) + 4096) if thinking else 4096)
    temperature = connector.temperature
    sampling = Sampling()
    if package is not None:
        max_tokens = package.max_tokens or package.max_completion_tokens or max_tokens
        if package.temperature is not None:
            temperature = package.temperature
        stop = (package.stop,) if isinstance(package.stop, str) else tuple(package.stop or ())
        effort = package.reasoning_effort
        if effort is not None and connector.type is ConnectorType.ANTHROPIC:
            thinking, budget, effort = True, EFFORT_BUDGETS[effort], None
            max_tokens = max(max_tokens, budget + 4096)
        sampling = Sampling(
            top_p=package.top_p,
            stop=stop,
            seed=package.seed,
            presence_penalty=package.presence_penalty,
            frequency_penalty=package.frequency_penalty,
            reasoning_effort=effort,
            extra=dict(package.model_extra or {}),
        )
    return ModelOptions(
        max_tokens=max_tokens,
        temperature=temperature,
        thinking=thinking,
        thinking_budget=budget or 2048,
        sampling=sampling,
    )


def compaction_policy(
    connector: ConnectorSpec, options: ModelOptions, settings: CompactionSettings
) -> CompactionPolicy | None:
    """The loop's compaction from a package's `compaction`, None when it is off.

    The default budget is 80% of the connector's context window less the reply's `max_tokens`
    (the estimate is rough: four characters a token), and never below 1000 tokens.
    """
    if not settings.enabled:
        return None
    budget = settings.budget_tokens
    if budget is None:
        capabilities = connector.capabilities
        window = (capabilities.max_input_tokens if capabilities else None) or DEFAULT_CONTEXT_TOKENS
        budget = max(1000, int(window * 0.8) - options.max_tokens)
    return CompactionPolicy(budget_tokens=budget, keep_rounds=settings.keep_rounds)


def package_model(connector: ConnectorSpec, package: PackageOptions | None) -> ConnectorSpec:
    """The connector with the package's `options.model` (when set) as its model."""
    if package is None or not package.model:
        return connector
    return connector.model_copy(update={"model": package.model})


def client_for(
    connector: ConnectorSpec | ClientSettings, connections: ModelConnections | None = None
) -> ModelClient:
    """The `ModelClient` for a connector (`anthropic` -> Messages API, `openai` -> Chat Completions),
    on the shared `connections` when given."""
    settings = connector if isinstance(connector, ClientSettings) else client_settings(connector)
    # Each SDK is imported when a connector of its kind is used, never on start-up (issue 14).
    if settings.provider == ConnectorType.ANTHROPIC.value:
        from orchestrator.llm.anthropic_client import AnthropicClient

        return AnthropicClient(settings, connections)
    from orchestrator.llm.openai_client import OpenAIClient

    return OpenAIClient(settings, connections)
