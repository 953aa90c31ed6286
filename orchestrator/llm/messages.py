"""The provider-neutral conversation: messages, content blocks, tool specs and the model request.

Connectors translate these to the Anthropic Messages or OpenAI Chat shapes; the loop engine,
checkpoints and compaction only ever see these models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from orchestrator.attribute_docs import describe_fields

_FROZEN = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)


class TextBlock(BaseModel):
    model_config = _FROZEN
    kind: Literal["text"] = "text"
    text: str


class ThinkingBlock(BaseModel):
    """A thinking block; kept (with its signature) because Anthropic wants it back with tool use."""

    model_config = _FROZEN
    kind: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


class ToolCallBlock(BaseModel):
    """A tool call the model made; `arguments` is the parsed JSON object."""

    model_config = _FROZEN
    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class ToolResultBlock(BaseModel):
    """The result of one tool call, sent back in a user-role message."""

    model_config = _FROZEN
    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    output: str
    is_error: bool = False


class ImageBlock(BaseModel):
    """An image in a user message, for a model with vision (`orchestrator.llm.images`): base64
    `data` of `media_type`, or a `url` the provider fetches itself."""

    model_config = _FROZEN
    kind: Literal["image"] = "image"
    media_type: str = "image/png"
    data: str = Field(default="", repr=False)
    url: str | None = None
    name: str = ""
    """The file name it came with (an attachment), for the text a model without vision gets."""


Block = Annotated[
    TextBlock | ThinkingBlock | ToolCallBlock | ToolResultBlock | ImageBlock, Field(discriminator="kind")
]


class ChatMessage(BaseModel):
    """One message: a `user` message holds text and/or tool results, an `assistant` one text,
    thinking and tool calls."""

    model_config = _FROZEN
    role: Literal["user", "assistant"]
    content: tuple[Block, ...]

    @classmethod
    def user(cls, text: str) -> ChatMessage:
        return cls(role="user", content=(TextBlock(text=text),))

    @classmethod
    def assistant(cls, text: str) -> ChatMessage:
        return cls(role="assistant", content=(TextBlock(text=text),))

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolCallBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))

    @property
    def is_prompt(self) -> bool:
        """A user message that starts a turn (text, no tool results)."""
        return self.role == "user" and not self.tool_results


class ToolSpec(BaseModel):
    """A tool as the model sees it."""

    model_config = _FROZEN
    name: str
    description: str
    input_schema: dict[str, Any]
    """JSON Schema of the arguments object."""


class ModelRequest(BaseModel):
    """One model call, independent of the provider."""

    model_config = _FROZEN
    system: str = ""
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    temperature: float | None = None
    thinking: bool = False
    """Ask for thinking (Anthropic extended thinking; OpenAI-compatible reasoning is passive)."""
    thinking_budget: int = 2048
    """Anthropic `budget_tokens` when `thinking` is on."""
    sampling: Sampling = Field(default_factory=lambda: Sampling())
    """The package's other request parameters (`top_p`, `stop`, `seed`, ...)."""


class Sampling(BaseModel):
    """Request parameters from a package's `options` beyond `max_tokens`/`temperature`. Each
    client sends the ones its API has; `orchestrator.dsl.option_support` refuses the others at
    load time, so none is dropped silently."""

    model_config = _FROZEN
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    extra: dict[str, JsonValue] = Field(default_factory=dict)
    """Provider keys Cage does not type, added to the request body as they are."""


class ModelOptions(BaseModel):
    """Per-call knobs the loop puts on every request (from the connector, overridable per assistant)."""

    model_config = _FROZEN
    max_tokens: int = 4096
    temperature: float | None = None
    thinking: bool = False
    thinking_budget: int = 2048
    sampling: Sampling = Field(default_factory=lambda: Sampling())

    def request(
        self, system: str, messages: tuple[ChatMessage, ...], tools: tuple[ToolSpec, ...] = ()
    ) -> ModelRequest:
        return ModelRequest(
            system=system,
            messages=messages,
            tools=tools,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            thinking=self.thinking,
            thinking_budget=self.thinking_budget,
            sampling=self.sampling,
        )


ModelRequest.model_rebuild()
