"""What the network layer (API, websocket, `cage run`) asks of the turn pipeline, and what it gets back.

The pipeline implements `TurnService`; the API and the CLI only use these names. Events that come
out of a `TurnHandle` or a subscription are stamped (session `seq`, `ts`, `turn_id`) and already
appended to the durable session log, so a client that reconnects with `after_seq` gets exactly
what it missed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from orchestrator.dsl import Assistant
from orchestrator.pipeline.call_result import CallResult
from orchestrator.stream import Event

Release = Callable[[], None]
"""Gives back what an `Admit` took; called once, when the turn has ended."""
Admit = Callable[[Assistant], Release]
"""The caller's own limits on a turn (the API's sandbox quota and per-owner caps), checked by
`TurnService.start` once the session is reserved and the assistant resolved. Raises to refuse (e.g.
`CapacityError`, before anything started); returns what to give back when the turn ends."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def new_turn_id() -> str:
    return f"turn-{uuid.uuid4().hex[:16]}"


def new_session_id() -> str:
    return f"session-{uuid.uuid4().hex[:12]}"


class Attachment(BaseModel):
    """A file the user sends with a message; written into the workspace before the turn."""

    model_config = _FROZEN
    name: str = Field(min_length=1, max_length=255)
    """File name, relative to `<workspace>/attachments/`; no path separators."""
    content: bytes = Field(repr=False)
    media_type: str = "application/octet-stream"


class InputMessage(BaseModel):
    """One message of the request: usually the user's new message (OpenAI clients send history too)."""

    model_config = _FROZEN
    role: Literal["system", "user", "assistant", "tool"] = "user"
    content: str | list[dict[str, JsonValue]] = ""
    name: str | None = None


def message_text(message: InputMessage) -> str:
    """The text of a message: its string, or its text parts joined."""
    if isinstance(message.content, str):
        return message.content
    parts = []
    for part in message.content:
        text = part.get("text")
        parts.append(text if isinstance(text, str) else json.dumps(part))
    return "\n".join(parts)


def last_user_text(messages: tuple[InputMessage, ...]) -> str:
    """What a CLI runner is prompted with: the last user message (Yao does the same)."""
    for message in reversed(messages):
        if message.role == "user":
            return message_text(message)
    return message_text(messages[-1]) if messages else ""


class ClientOptions(BaseModel):
    """The per-turn overrides a client may ask for (Yao's options). The API's request model narrows
    some limits for the network (`orchestrator.api.routers.streams.RequestOptions`)."""

    model_config = _FROZEN
    history_size: int | None = Field(default=None, ge=0, le=1000)
    skip_history: bool = False
    connector: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    locale: str | None = None
    workspace_id: str | None = None
    turn_timeout: float | None = Field(default=None, gt=0)


class TurnOptions(ClientOptions):
    """A turn's options: a client's overrides, and what only the CLI sets."""

    host_workspace: Path | None = None
    """CI mode only (`cage run`): bind-mount this host directory. Never accepted from the network."""


class TurnInput(BaseModel):
    """One turn to run."""

    model_config = _FROZEN
    assistant_id: str = Field(min_length=1)
    owner: str = Field(min_length=1)
    """The principal (user or team id) the turn runs for; scopes sessions, sandboxes and memory."""
    session_id: str = Field(min_length=1, max_length=128)
    messages: tuple[InputMessage, ...] = Field(min_length=1)
    turn_id: str = Field(default_factory=new_turn_id)
    attachments: tuple[Attachment, ...] = ()
    options: TurnOptions = TurnOptions()
    metadata: Mapping[str, Any] = Field(default_factory=dict)


class TurnIds:
    """The ids every `TurnHandle` answers, read off the `TurnInput` it runs (`input`)."""

    input: TurnInput

    @property
    def turn_id(self) -> str:
        return self.input.turn_id

    @property
    def session_id(self) -> str:
        return self.input.session_id


class TurnHandle(Protocol):
    """A turn running in the background. Iterating `events()` never stops the turn when abandoned."""

    @property
    def turn_id(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def ending(self) -> bool:
        """Its root `stream_end` is out: the turn is over for clients, the pipeline persisting it
        (a new turn of the session waits for that, bounded, instead of being refused)."""
        ...

    def events(self) -> AsyncIterator[Event]:
        """This turn's stamped events from its `stream_start` to its `stream_end`."""
        ...

    async def interrupt(self, *, force: bool = False) -> None:
        """Graceful: stop the runner's turn, keep the session and its sandbox. Force: kill at once."""
        ...

    async def result(self) -> CallResult:
        """Wait for the end of the turn."""
        ...


class TurnService(Protocol):
    """The pipeline as seen from the API and the CLI."""

    async def start(self, turn: TurnInput, *, admit: Admit | None = None) -> TurnHandle:
        """The one admission point: reserve the session (one turn at a time), resolve the assistant,
        check `admit`, make sure the session exists and is the owner's, then run the turn in the
        background.

        Raises:
            NotFound: unknown assistant (or one the owner may not use), or another owner's session.
            Conflict: a turn is already running in this session.
            ConfigError: the assistant's configuration is broken.
            CapacityError: refused by `admit`.
        """
        ...

    def running(self, session_id: str) -> TurnHandle | None:
        """The turn running in `session_id`, if any."""
        ...

    def turn(self, turn_id: str) -> TurnHandle | None:
        """A running turn by id (for `POST /v1/chat/completions/{turn_id}/interrupt`)."""
        ...

    def subscribe(self, session_id: str, *, after_seq: int = 0) -> AsyncIterator[Event]:
        """Every event of the session with `seq > after_seq`: first from the durable log, then live,
        with no duplicate and no gap. Runs until the subscriber stops iterating."""
        ...

    async def aclose(self) -> None:
        """Graceful shutdown: running turns end with `stream_end` cancelled; sandboxes per lifecycle."""
        ...
