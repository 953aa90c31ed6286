"""The envelope every protocol event carries: version, ordering, identity and delta bookkeeping."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.attribute_docs import describe_fields

DeltaAction = Literal["append", "merge", "replace"]
"""How a delta event's props combine with the message so far.

* `append`: string props (`content`, `arguments`) are appended to what the message holds;
* `merge`: props that are present replace the held ones, except `input_delta`, which is the next
  fragment of the tool input (clients concatenate fragments);
* `replace`: the props replace the message's props as a whole (the `loading` indicator).
"""


class Envelope(BaseModel):
    """Fields shared by every event. `seq`, `ts`, `session_id` and `turn_id` are stamped by the
    `SessionEmitter`; producers (translators, the native loop, the builder) leave them at zero/empty.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=describe_fields)

    v: Literal[1] = 1
    """Protocol version."""
    seq: int = 0
    """Per-session sequence number: gap-free, increasing across turns; 0 means not stamped yet."""
    ts: int = 0
    """Milliseconds since the Unix epoch when the event was stamped; never decreases in a session."""
    session_id: str = ""
    turn_id: str = ""
    thread_id: str | None = None
    """Set on events of a nested call (delegation, agent-to-agent); None for the turn's own events."""
    message_id: str | None = None
    """The message this event belongs to; deltas of one message share it."""
    chunk_id: str | None = None
    """Unique id of one delta within the stream."""
    delta: bool | None = None
    """True when the props are a fragment to combine with the message so far."""
    delta_action: DeltaAction | None = None
