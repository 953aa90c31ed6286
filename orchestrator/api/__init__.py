"""The HTTP and websocket server: sessions, OpenAI-compatible chat, native SSE, admin, operations."""

from orchestrator.api.app import create_app
from orchestrator.api.auth import Principal
from orchestrator.api.config import ApiConfig
from orchestrator.api.runtime import Runtime, RuntimeFactory, production_runtime

__all__ = [
    "ApiConfig",
    "Principal",
    "Runtime",
    "RuntimeFactory",
    "create_app",
    "production_runtime",
]
