"""Permission requests and decisions shared by every runner, the native loop and the broker.

Pure value types and one protocol: runners (host adapters), the native loop (`orchestrator.llm`)
and the pipeline's broker all speak them, so none of them imports the others.
"""

from orchestrator.permissions.requests import Decision, PermissionGate, Question, ToolRequest

__all__ = ["Decision", "PermissionGate", "Question", "ToolRequest"]
