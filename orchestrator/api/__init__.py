"""The HTTP and websocket server: sessions, OpenAI-compatible chat, native SSE, admin, operations."""

from orchestrator.api.app import create_app
from orchestrator.api.auth import Principal
from orchestrator.api.config import ApiConfig

__all__ = [
    "ApiConfig",
    "Principal",
    "create_app",
]
