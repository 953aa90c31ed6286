"""The one error of the client: the server refused a request (or could not be reached)."""

from __future__ import annotations

from orchestrator.errors import CageError


class CageApiError(CageError):
    """An HTTP status (0: the server could not be reached) and the server's own message."""

    def __init__(self, status: int, message: str, *, code: str = "") -> None:
        self.status = status
        self.code = code
        where = f"HTTP {status}" if status else "no answer"
        super().__init__(f"{where}: {message}")
