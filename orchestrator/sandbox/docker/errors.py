"""Engine errors translated once, at the edge, into `orchestrator.errors` types (STYLE R9)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import docker.errors
import requests.exceptions

from orchestrator.errors import EngineUnavailable, SandboxError, SandboxNotFound
from orchestrator.redaction import redact


def _explain(exc: docker.errors.APIError) -> str:
    text = exc.explanation if isinstance(exc.explanation, str) and exc.explanation else str(exc)
    return redact(text)[:500]


@contextmanager
def engine_errors(sandbox_id: str = "", *, not_found: str = "sandbox") -> Iterator[None]:
    """Translate docker SDK / transport errors raised in the block.

    `not_found="sandbox"` turns a 404 into `SandboxNotFound(sandbox_id)`; any other value turns it
    into a `SandboxError` saying that this thing (an image, a volume, a path) was not found.
    """
    try:
        yield
    except docker.errors.NotFound as exc:
        if not_found == "sandbox" or "no such container" in _explain(exc).lower():
            raise SandboxNotFound(sandbox_id) from exc
        raise SandboxError(sandbox_id, f"{not_found} not found: {_explain(exc)}") from exc
    except docker.errors.APIError as exc:
        raise SandboxError(sandbox_id, f"engine refused: {_explain(exc)}") from exc
    except (requests.exceptions.RequestException, docker.errors.DockerException) as exc:
        # RequestException covers ReadTimeout (a slow stop or remove), not only ConnectionError
        raise EngineUnavailable(redact(str(exc))[:300]) from exc
