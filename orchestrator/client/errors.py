"""The one error of the client: the server refused a request (or could not be reached)."""

from __future__ import annotations

from orchestrator.errors import CageError


class CageApiError(CageError):
    """An HTTP status (0: the server could not be reached), the server's own message and, when it
    sent one, its error code (`server_code`)."""

    code = "api_error"

    def __init__(self, status: int, message: str, *, code: str = "") -> None:
        self.status = status
        self.server_code = code
        where = f"HTTP {status}" if status else "no answer"
        super().__init__(f"{where}: {message}")
