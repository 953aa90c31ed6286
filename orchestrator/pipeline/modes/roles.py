"""The models of a runner's other roles (`runner.connectors.light`, `.heavy`), checked against
the connector the runner drives.

The CLI reaches one model endpoint, through the model gateway with the runner connector's
credentials; another role can therefore only name another model *of that endpoint*. A role
connector of another type, URL, key or headers is refused with the file and key path. Which
roles a runner maps at all is `orchestrator.dsl.role_support` (the loader drops the others).
"""

from __future__ import annotations

from orchestrator.dsl import AppLoader, Assistant, ConnectorSpec
from orchestrator.errors import ConfigError


def _same_endpoint(a: ConnectorSpec, b: ConnectorSpec) -> bool:
    return (
        a.type == b.type
        and a.base_url.rstrip("/") == b.base_url.rstrip("/")
        and a.key.get_secret_value() == b.key.get_secret_value()
        and {k: v.get_secret_value() for k, v in a.headers.items()}
        == {k: v.get_secret_value() for k, v in b.headers.items()}
    )


def _where(assistant: Assistant, role: str) -> tuple[str, str]:
    """(file, key path) of `runner.connectors.<role>`: sandbox.yao, or package.yao's embedded one."""
    if assistant.own_sandbox_file:
        return str(assistant.file("sandbox.yao")), f"runner.connectors.{role}"
    return str(assistant.file("package.yao")), f"sandbox.runner.connectors.{role}"


def role_models(assistant: Assistant, loader: AppLoader, connector: ConnectorSpec | None) -> dict[str, str]:
    """Role -> model name for the roles other than `default` in `runner.connectors`.

    Raises:
        ConfigError: a role's connector is unusable, names no model, or is served by another
            endpoint than `connector` (or the runner has no connector at all).
    """
    spec = assistant.sandbox
    if spec is None:
        return {}
    models: dict[str, str] = {}
    for role, choice in spec.runner.connectors.items():
        if role == "default":
            continue
        file, key_path = _where(assistant, role)
        other = loader.connector(choice.connector)
        if connector is None:
            raise ConfigError(
                f"a {role} connector needs the runner's own connector (set `connector` or "
                "runner.connectors.default)",
                file=file,
                key_path=key_path,
            )
        if not _same_endpoint(other, connector):
            raise ConfigError(
                f"connector {other.id!r} is not served by the same endpoint as the runner's connector "
                f"{connector.id!r} (type, URL, key and headers): the {spec.runner.name} runner reaches "
                "one endpoint, so a role can only name another model of it",
                file=file,
                key_path=key_path,
            )
        if not other.model:
            raise ConfigError(f"connector {other.id!r} names no model", file=file, key_path=key_path)
        models[role] = other.model
    return models
