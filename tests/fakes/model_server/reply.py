"""A resolved model reply: what one step becomes for one request, independent of the wire API."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from tests.fakes.model_server.scenario import Step, TextPart, ThinkingPart
from tests.fakes.model_server.tools import OfferedTool, ToolCall, resolve_call

INJECTED_PREFIXES = (
    "<system-reminder>",
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "# AGENTS.md instructions",
)
"""User-role texts that CLIs inject; they are not prompts and do not restart the script."""


def is_injected(text: str) -> bool:
    """Whether a user-role text is CLI-injected context rather than a real prompt."""
    return text.lstrip().startswith(INJECTED_PREFIXES)


def tokens(text: str) -> int:
    """Deterministic token count: one token per four characters, rounded up."""
    return (len(text) + 3) // 4


def canonical(body: Any) -> str:
    """The canonical JSON of a request body (sorted keys, no spaces)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def input_tokens(body: Any) -> int:
    """Input tokens of a request: `tokens()` of its canonical JSON, at least 1."""
    return max(1, tokens(canonical(body)))


def chunks(text: str, size: int = 8) -> list[str]:
    """Split text into streaming deltas: words (with their trailing space), long words cut at `size`."""
    pieces: list[str] = []
    for word in re.findall(r"\S+\s*|\s+", text):
        pieces.extend(word[i : i + size] for i in range(0, len(word), size))
    return pieces or [""]


class Conversation(BaseModel):
    """What the server needs from a request: model, offered tools, tool results since the prompt."""

    model_config = ConfigDict(frozen=True)
    model: str
    tools: list[OfferedTool]
    tool_results: int


class Usage(BaseModel):
    """Token usage reported for one reply (the same numbers in every API's shape)."""

    model_config = ConfigDict(frozen=True)
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0


class Reply(BaseModel):
    """One step resolved against one request."""

    model_config = ConfigDict(frozen=True)
    id: str
    """A hex digest of the request; ids of messages, items and calls derive from it."""
    model: str
    parts: list[TextPart | ThinkingPart | ToolCall]
    usage: Usage

    @property
    def calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


def call_arguments(call: ToolCall) -> str:
    """JSON arguments of a call; a freeform input becomes `{"input": ...}` for APIs without custom tools."""
    return json.dumps({"input": call.input}) if call.input is not None else call.arguments


def signature(thought: str) -> str:
    """A stable fake signature for a thinking block."""
    return "sig_" + hashlib.sha256(thought.encode()).hexdigest()[:32]


def build_reply(step: Step, conversation: Conversation, body: Any) -> Reply:
    """Resolve `step` for a request: pick tools, assign ids, count usage."""
    digest = hashlib.sha256(canonical(body).encode()).hexdigest()[:20]
    parts: list[TextPart | ThinkingPart | ToolCall] = []
    for index, part in enumerate(step.parts):
        if isinstance(part, TextPart | ThinkingPart):
            parts.append(part)
        elif (call := resolve_call(part, conversation.tools, f"call_{digest}_{index}")) is not None:
            parts.append(call)
    if not parts:
        parts.append(TextPart(text="done"))
    thought = "".join(p.thinking for p in parts if isinstance(p, ThinkingPart))
    produced = "".join(
        p.text
        if isinstance(p, TextPart)
        else p.thinking
        if isinstance(p, ThinkingPart)
        else call_arguments(p)
        for p in parts
    )
    usage = Usage(
        input_tokens=input_tokens(body),
        output_tokens=max(1, tokens(produced)),
        reasoning_tokens=tokens(thought),
    )
    return Reply(id=digest, model=conversation.model, parts=parts, usage=usage)
