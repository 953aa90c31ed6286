"""The server's record of every request it answered (secrets stripped)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from tests.fakes.model_server.reply import Reply, Usage

SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"})
"""Headers that are never recorded."""


def safe_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Lower-cased headers without the ones carrying credentials."""
    return {k.lower(): v for k, v in headers.items() if k.lower() not in SECRET_HEADERS}


def credential_digest(headers: Mapping[str, str]) -> str | None:
    """SHA-256 (hex) of the key the client sent (`x-api-key`, `api-key` or a bearer token), so tests
    can check which key arrived without the log ever holding one."""
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("x-api-key") or lowered.get("api-key")
    if value is None and lowered.get("authorization", "").lower().startswith("bearer "):
        value = lowered["authorization"][7:].strip()
    return hashlib.sha256(value.encode()).hexdigest() if value else None


class RequestRecord(BaseModel):
    """One request and how the server answered it."""

    model_config = ConfigDict(frozen=True)
    seq: int
    method: str
    path: str
    query: str = ""
    headers: dict[str, str]
    credential_sha256: str | None = None
    """`credential_digest` of the request's headers (model endpoints only)."""
    peer: str = ""
    """The client's address and port (model endpoints only): one per connection it opened."""
    body: Any = None
    api: str
    """`anthropic`, `openai-chat`, `openai-responses`, `count_tokens`, `models`, `root` (`/`) or `unknown` (no such route)."""
    model: str = ""
    stream: bool = False
    scenario: str | None = None
    step: int | None = None
    """Index of the step played (-1: the built-in `done` text); None when no step was played."""
    status: int = 200
    usage: Usage | None = None
    reply: Reply | None = None
    """What the server answered (text, thinking and resolved tool calls), when it played a step."""

    def tool_results(self) -> list[str]:
        """The text of every tool result the client sent back in this request, in order
        (Anthropic `tool_result` blocks, Chat `tool` messages, Responses `*_call_output` items)."""
        body = self.body if isinstance(self.body, dict) else {}
        out: list[str] = []
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            if message.get("role") == "tool":
                out.append(_text(content))
            elif isinstance(content, list):
                out += [
                    _text(b.get("content"))
                    for b in content
                    if isinstance(b, dict) and b.get("type") == "tool_result"
                ]
        for item in body.get("input") or [] if isinstance(body.get("input"), list) else []:
            if isinstance(item, dict) and str(item.get("type", "")).endswith("_call_output"):
                out.append(_text(item.get("output")))
        return out


def _text(content: Any) -> str:
    """A tool result's content as text: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p)
    return "" if content is None else str(content)


class RequestLog:
    """A thread-safe, append-only list of `RequestRecord`s, optionally mirrored to a JSONL file."""

    def __init__(self, path: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._records: list[RequestRecord] = []
        self._path = path

    @property
    def mirrored(self) -> bool:
        """Whether appends also write to a file (and so should run off the event loop)."""
        return self._path is not None

    def append(self, **fields: Any) -> RequestRecord:
        """Record a request; `seq` is assigned here."""
        with self._changed:
            record = RequestRecord(seq=len(self._records), **fields)
            self._records.append(record)
            if self._path is not None:
                with self._path.open("a", encoding="utf-8") as fh:
                    fh.write(record.model_dump_json() + "\n")
            self._changed.notify_all()
            return record

    def all(self) -> list[RequestRecord]:
        """A snapshot of every record so far."""
        with self._lock:
            return list(self._records)

    def for_scenario(self, name: str) -> list[RequestRecord]:
        """Records of requests that played scenario `name`."""
        return [r for r in self.all() if r.scenario == name]

    def wait_for(self, count: int, timeout: float = 5.0) -> list[RequestRecord]:
        """Block until at least `count` records exist; raises `TimeoutError` otherwise."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._records) >= count, timeout=timeout):
                raise TimeoutError(f"{len(self._records)} requests logged, expected {count}")
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __getitem__(self, index: int) -> RequestRecord:
        with self._lock:
            return self._records[index]

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self.all())
