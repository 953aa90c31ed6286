"""The `ModelClient` Protocol, connector settings, and the guards every connector shares.

A connector streams `ModelDelta`s for a `ModelRequest`. Retries on 429/5xx are the SDKs' own
(`max_retries`, honouring `retry-after`); what the SDKs cannot see — a stream that goes quiet
or is cut after it started — is turned into a `ModelError` here, so a model call never hangs.
"""

from __future__ import annotations

import ssl
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Protocol, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, SecretStr

from orchestrator.attribute_docs import describe_fields
from orchestrator.errors import ModelError
from orchestrator.llm.deltas import ModelDelta
from orchestrator.llm.messages import ModelRequest
from orchestrator.redaction import redact, register_secret

T = TypeVar("T")
DEFAULT_TIMEOUT = 120.0
DEFAULT_RETRIES = 2


@cache
def shared_tls() -> ssl.SSLContext:
    """One TLS context for every model client of the process. Building one loads the CA bundle
    (about 30 ms of CPU), which each turn's new SDK client paid before; the context is read-only
    once built, so sharing it is safe. It trusts what the SDKs' transport (httpx2) trusts by default."""
    import httpx2  # with the SDKs, only when a model client is built

    return httpx2.create_ssl_context()


class ModelClient(Protocol):
    """Streams one model step. Raises `ModelError` (never a provider exception) on failure."""

    @property
    def model(self) -> str: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]: ...

    async def aclose(self) -> None:
        """Close the HTTP connections; idempotent."""


class ClientSettings(BaseModel):
    """What a connector client needs, taken from a `ConnectorSpec` (or built directly in tests)."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)
    provider: str
    model: str
    base_url: str
    key: SecretStr = SecretStr("")
    timeout: float = DEFAULT_TIMEOUT
    """Seconds per request attempt, and the longest the stream may stay silent."""
    max_retries: int = DEFAULT_RETRIES
    headers: dict[str, SecretStr] = {}

    def secret_key(self) -> str:
        value = self.key.get_secret_value()
        register_secret(value)  # whatever echoes it later (an error body, a log) gets it masked
        return value

    def header_values(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in self.headers.items():
            register_secret(value.get_secret_value())
            out[name] = value.get_secret_value()
        return out


def _loaded(attribute: str, *modules: str) -> tuple[type[BaseException], ...]:
    """`attribute` of each of `modules` already imported: an SDK nobody imported raised nothing.

    Evaluated only when an exception passes, so this module imports no SDK (issue 14).
    """
    return tuple(getattr(sys.modules[m], attribute) for m in modules if m in sys.modules)


def _retryable_status(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


@contextmanager
def model_errors(provider: str, timeout: float) -> Iterator[None]:
    """Translate SDK, transport and timeout exceptions into `ModelError` (R9)."""
    try:
        yield
    except _loaded("APIStatusError", "anthropic", "openai") as exc:
        status = exc.status_code  # type: ignore[attr-defined]
        message = redact(f"request failed: {exc.message}")  # type: ignore[attr-defined]
        raise ModelError(provider, message, status=status, retryable=_retryable_status(status)) from exc
    except _loaded("APITimeoutError", "anthropic", "openai") as exc:
        raise ModelError(provider, f"request timed out after {timeout:g}s", retryable=True) from exc
    except _loaded("APIConnectionError", "anthropic", "openai") as exc:
        raise ModelError(provider, "connection failed", retryable=True) from exc
    except _loaded("APIError", "anthropic", "openai") as exc:
        message = redact(f"stream error: {exc.message}")  # type: ignore[attr-defined]
        raise ModelError(provider, message, retryable=True) from exc
    except _loaded("TimeoutException", "httpx2") as exc:
        raise ModelError(provider, f"stream timed out after {timeout:g}s", retryable=True) from exc
    except _loaded("HTTPError", "httpx2") as exc:
        raise ModelError(provider, f"stream interrupted ({type(exc).__name__})", retryable=True) from exc
    except TimeoutError as exc:
        raise ModelError(provider, f"no data from the model for {timeout:g}s", retryable=True) from exc


async def guarded(source: AsyncIterator[T], provider: str, idle_timeout: float) -> AsyncIterator[T]:
    """Yield from `source`, failing with `ModelError` when no item arrives within `idle_timeout`.

    SSE keep-alive comments reset the HTTP read timeout but yield no item, so this guard is what
    stops a stream that hangs politely.
    """
    iterator = source.__aiter__()
    while True:
        with model_errors(provider, idle_timeout):
            with anyio.fail_after(idle_timeout):
                try:
                    item = await iterator.__anext__()
                except StopAsyncIteration:
                    return
        yield item
