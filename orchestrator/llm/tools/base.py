"""The `Tool` Protocol, what a tool gets (`ToolContext`) and returns (`ToolResult`), and `ToolBox`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from orchestrator.attribute_docs import describe_fields
from orchestrator.errors import ToolError
from orchestrator.llm.messages import ToolSpec

if TYPE_CHECKING:
    from orchestrator.llm.event_sink import EventSink
    from orchestrator.permissions import PermissionGate
    from orchestrator.stream import TurnBuilder


class ToolResult(BaseModel):
    """What a tool hands back to the model; `metadata` is for the trace, not the model."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    output: str
    is_error: bool = False
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @classmethod
    def error(cls, message: str, **metadata: JsonValue) -> ToolResult:
        return cls(output=message, is_error=True, metadata=dict(metadata))


@dataclass(frozen=True)
class ToolContext:
    """The run a tool call belongs to. `sink` and `builder` let a tool emit events of its own
    (the `agent` tool streams its sub-agents as nested threads)."""

    session_id: str
    turn_id: str
    tool_call_id: str
    sink: EventSink | None = None
    builder: TurnBuilder | None = None
    cancel: anyio.Event | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    gate: PermissionGate | None = None
    """The loop's permission gate: sub-agents ask through it, the `question` tool asks the user."""


class Tool(Protocol):
    """A tool the model may call."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def read_only(self) -> bool:
        """True when the tool cannot change anything (sub-agents get only these)."""
        ...

    @property
    def input_schema(self) -> dict[str, Any]: ...

    async def run(self, args: Mapping[str, JsonValue], ctx: ToolContext) -> ToolResult: ...


A = TypeVar("A", bound=BaseModel)


class ArgsModel(BaseModel):
    """Base of the tools' argument models: unknown keys are an error the model gets to see."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)


class TypedTool(Generic[A]):
    """A tool whose arguments are a pydantic model; bad arguments become an error result."""

    name: ClassVar[str]
    description: ClassVar[str]
    read_only: ClassVar[bool] = True
    args_model: type[A]

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return schema

    async def run(self, args: Mapping[str, JsonValue], ctx: ToolContext) -> ToolResult:
        try:
            parsed = self.args_model.model_validate(dict(args))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            return ToolResult.error(f"invalid arguments for {self.name}: {problems}")
        try:
            return await self.call(parsed, ctx)
        except ToolError as exc:
            return ToolResult.error(str(exc) if exc.tool else f"{self.name}: {exc}")

    async def call(self, args: A, ctx: ToolContext) -> ToolResult:
        raise NotImplementedError


class ToolBox:
    """The tools of one loop, by name, in the order given."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"duplicate tool name {tool.name!r}")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(
            ToolSpec(name=t.name, description=t.description, input_schema=t.input_schema) for t in self
        )

    def read_only(self) -> ToolBox:
        """Only the tools that cannot change anything."""
        return ToolBox(t for t in self if t.read_only)

    def without(self, *names: str) -> ToolBox:
        return ToolBox(t for t in self if t.name not in names)
