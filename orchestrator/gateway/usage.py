"""Usage read from the model's own answers as they pass through the gateway.

The gateway is the one place a sandbox cannot lie about: a runner's usage events come from a
CLI the agent controls, the bytes from the provider do not. `UsageMeter` watches a response
without holding it back: SSE `data:` lines that mention `usage` are parsed (Anthropic
`message_start`/`message_delta`, OpenAI session chunks, Responses `response.completed`); a plain
JSON answer is kept up to `MAX_JSON_BYTES` and read at the end.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from orchestrator.stream import Usage

MAX_LINE_BYTES = 1 << 20
"""Longer SSE lines are skipped (their usage, if any, is lost, never the stream)."""
MAX_JSON_BYTES = 4 << 20


def _int(node: Mapping[str, Any], *path: str) -> int:
    value: Any = node
    for key in path:
        if not isinstance(value, Mapping):
            return 0
        value = value.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class UsageMeter:
    """Incremental reader of one response; `usage` is the total seen so far (one model call)."""

    def __init__(self, content_type: str) -> None:
        self._sse = "text/event-stream" in content_type
        self._json = "json" in content_type and not self._sse
        self._pending = b""
        self._skipping = False
        self._body = bytearray()
        self._input = self._cached = self._output = self._reasoning = 0

    def feed(self, chunk: bytes) -> None:
        if self._json:
            if len(self._body) + len(chunk) <= MAX_JSON_BYTES:
                self._body += chunk
            return
        if not self._sse:
            return
        data = self._pending + chunk
        lines = data.split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            if self._skipping:
                self._skipping = False
                continue
            self._line(line)
        if len(self._pending) > MAX_LINE_BYTES:
            self._pending = b""
            self._skipping = True

    def close(self) -> Usage:
        if self._json and self._body:
            try:
                document = json.loads(self._body)
            except ValueError:
                document = None
            if isinstance(document, dict):
                self._document(document)
        elif self._sse and self._pending and not self._skipping:
            self._line(self._pending)
        self._pending, self._body = b"", bytearray()
        return self.usage

    @property
    def usage(self) -> Usage:
        return Usage(
            input_tokens=self._input,
            cached_input_tokens=self._cached,
            output_tokens=self._output,
            reasoning_tokens=self._reasoning,
        )

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:") or b'"usage"' not in line:
            return
        try:
            event = json.loads(line[5:])
        except ValueError:
            return
        if isinstance(event, dict):
            self._document(event)

    def _document(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":  # Anthropic: the prompt side, then output grows in message_delta
            self._anthropic(event.get("message", {}).get("usage") or {})
        elif kind == "message_delta":
            self._output = max(self._output, _int(event, "usage", "output_tokens"))
        elif kind == "message":  # Anthropic, not streamed
            self._anthropic(event.get("usage") or {})
            self._output = _int(event, "usage", "output_tokens")
        elif isinstance(event.get("response"), Mapping):  # Responses API: response.completed
            self._responses(event["response"].get("usage") or {})
        elif kind == "response" or event.get("object") == "response":
            self._responses(event.get("usage") or {})
        elif isinstance(event.get("usage"), Mapping):  # chat completions (the last chunk, or the body)
            usage = event["usage"]
            self._input = _int(usage, "prompt_tokens")
            self._cached = _int(usage, "prompt_tokens_details", "cached_tokens")
            self._output = _int(usage, "completion_tokens")
            self._reasoning = _int(usage, "completion_tokens_details", "reasoning_tokens")

    def _anthropic(self, usage: Mapping[str, Any]) -> None:
        cached = _int(usage, "cache_read_input_tokens") + _int(usage, "cache_creation_input_tokens")
        self._input = _int(usage, "input_tokens") + cached
        self._cached = cached
        self._output = max(self._output, _int(usage, "output_tokens"))

    def _responses(self, usage: Mapping[str, Any]) -> None:
        if not usage:
            return
        self._input = _int(usage, "input_tokens")
        self._cached = _int(usage, "input_tokens_details", "cached_tokens")
        self._output = _int(usage, "output_tokens")
        self._reasoning = _int(usage, "output_tokens_details", "reasoning_tokens")
