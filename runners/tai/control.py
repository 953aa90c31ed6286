"""The control lines between `cage-tai run` and the host when the turn asks Cage.

tai's loop asks its gate before each tool call (and its `question` tool asks the user). Inside
the container that gate is `runners.tai.incontainer.gate.StdioGate`: it prints one control line on stdout,
among the protocol events,

    {"cage_control":"permission","id":"p1","request":{"tool":"bash","input":{...},"subject":"ls",...}}
    {"cage_control":"question","id":"q1","question":{"text":"Which colour?","options":["red"],...}}

and waits for the answer line the bridge writes on its stdin:

    {"id":"p1","allow":false,"by":"user","message":"not today","rule":null}
    {"id":"q1","answer":"blue"}

The host-side translator turns a control line into a `ControlRequest` whose reply builds the
answer line. Pure value types and line builders; no I/O.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from orchestrator.permissions import Decision, Question, ToolRequest
from orchestrator.permissions.requests import DecidedBy
from runners.base import ControlRequest, PermissionAsk, QuestionAsk

_FROZEN = ConfigDict(extra="forbid", frozen=True)
CONTROL_KEY = "cage_control"
MAX_ID = 64


class WireRequest(BaseModel):
    """A `ToolRequest` as tai prints it."""

    model_config = _FROZEN
    tool: str = Field(min_length=1, max_length=200)
    input: dict[str, JsonValue] = Field(default_factory=dict)
    subject: str = ""
    call_id: str | None = None


class WireQuestion(BaseModel):
    model_config = _FROZEN
    text: str = Field(min_length=1)
    options: tuple[str, ...] = ()
    call_id: str | None = None


class PermissionLine(BaseModel):
    model_config = _FROZEN
    cage_control: Literal["permission"]
    id: str = Field(min_length=1, max_length=MAX_ID)
    request: WireRequest


class QuestionLine(BaseModel):
    model_config = _FROZEN
    cage_control: Literal["question"]
    id: str = Field(min_length=1, max_length=MAX_ID)
    question: WireQuestion


class AnswerLine(BaseModel):
    """One answer line on tai's stdin: a decision (`allow`) or a question's `answer`."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    id: str
    allow: bool | None = None
    by: DecidedBy = "user"
    message: str = ""
    rule: str | None = None
    answer: str | None = None

    def decision(self) -> Decision:
        return Decision(allow=bool(self.allow), by=self.by, message=self.message, rule=self.rule)


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def permission_line(request_id: str, request: ToolRequest) -> str:
    """The stdout line tai prints to ask about `request` (without its newline)."""
    wire = WireRequest(
        tool=request.tool,
        input=json.loads(json.dumps(dict(request.input), default=str)),
        subject=request.subject,
        call_id=request.call_id,
    )
    return _line({CONTROL_KEY: "permission", "id": request_id, "request": wire.model_dump()})


def question_line(request_id: str, question: Question) -> str:
    """The stdout line tai prints to put `question` to the user (without its newline)."""
    wire = WireQuestion(text=question.text, options=question.options, call_id=question.call_id)
    return _line({CONTROL_KEY: "question", "id": request_id, "question": wire.model_dump()})


def decision_line(request_id: str, decision: Decision) -> bytes:
    """The stdin line answering permission request `request_id`."""
    body = {"id": request_id, "allow": decision.allow, "by": decision.by, "message": decision.message}
    return (_line({**body, "rule": decision.rule}) + "\n").encode()


def answer_line(request_id: str, answer: str) -> bytes:
    """The stdin line answering question `request_id`."""
    return (_line({"id": request_id, "answer": answer}) + "\n").encode()


def parse_answer(line: bytes | str) -> AnswerLine | None:
    """An answer line, or None when it is not one (ignored by the gate)."""
    try:
        return AnswerLine.model_validate_json(line)
    except ValidationError:
        return None


def is_control(value: Any) -> bool:
    """A JSON value printed by tai is a control line (not a protocol event)."""
    return isinstance(value, dict) and CONTROL_KEY in value


def control_request(value: dict[str, Any], runner: str) -> ControlRequest | None:
    """The `ControlRequest` of a control line tai printed, or None when it is malformed."""
    try:
        if value.get(CONTROL_KEY) == "permission":
            line = PermissionLine.model_validate(value)
            wire = line.request
            request = ToolRequest(
                tool=wire.tool, input=wire.input, subject=wire.subject, call_id=wire.call_id, runner=runner
            )
            return PermissionAsk(request, _DecisionReply(line.id))
        if value.get(CONTROL_KEY) == "question":
            qline = QuestionLine.model_validate(value)
            q = qline.question
            return QuestionAsk(
                Question(text=q.text, options=q.options, call_id=q.call_id), _AnswerReply(qline.id)
            )
    except ValidationError:
        return None
    return None


class _DecisionReply:
    def __init__(self, request_id: str) -> None:
        self.request_id = request_id

    def __call__(self, decision: Decision) -> bytes:
        return decision_line(self.request_id, decision)


class _AnswerReply:
    def __init__(self, request_id: str) -> None:
        self.request_id = request_id

    def __call__(self, answer: str) -> bytes:
        return answer_line(self.request_id, answer)
