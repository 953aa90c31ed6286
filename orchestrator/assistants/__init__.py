"""Every assistant one process knows, wherever it is kept: `AssistantRegistry`."""

from orchestrator.assistants.registry import AssistantRegistry, exposed_environ, version_of

__all__ = ["AssistantRegistry", "exposed_environ", "version_of"]
