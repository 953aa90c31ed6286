"""Error kind → what each surface says about it: the one place errors become numbers.

Every Cage error class declares a stable `code` and has a `kind` (`orchestrator/errors.py`). This
table gives, per kind, the HTTP status (`api/errors.py`), the websocket `session.error` code and
close code (`api/session_socket.py`), and the CLI exit code (`cli/app.py`, `cage run`). Nothing else
looks at an error's class or name to pick one: tests/unit/test_error_table.py holds that.

Close codes are `4000 + status` for a 4xx (4400 for a 422: `invalid` either way); every 5xx
closes with 4500. Error events of a turn carry
the error's `code`; `cage run` reads the kinds of the codes its turn ended with (`turn_exit_code`).
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from orchestrator.errors import CageError, ErrorKind, error_class


class ExitCode(enum.IntEnum):
    """What `cage` and `cage run` exit with (docs/ci.md)."""

    OK = 0
    FAILED = 1
    """The agent's turn ended in error, or another Cage error."""
    CONFIG = 2
    """Bad usage, an unknown name, or a broken assistant configuration."""
    INFRA = 3
    """The sandbox or the infrastructure failed: no engine, an image build, a prepare step, a cap."""
    TIMEOUT = 124
    INTERRUPTED = 130


@dataclass(frozen=True)
class Surfaces:
    """How one kind of error shows on each surface."""

    http_status: int
    ws_code: str
    """`code` of the websocket's `session.error` frame."""
    close_code: int
    """Websocket close code when the error refuses the connection."""
    exit_code: ExitCode


TABLE: Mapping[ErrorKind, Surfaces] = MappingProxyType(
    {
        ErrorKind.BAD_REQUEST: Surfaces(400, "invalid", 4400, ExitCode.CONFIG),
        ErrorKind.CONFIG: Surfaces(422, "invalid", 4400, ExitCode.CONFIG),
        ErrorKind.UNAUTHORIZED: Surfaces(401, "unauthorized", 4401, ExitCode.FAILED),
        ErrorKind.FORBIDDEN: Surfaces(403, "forbidden", 4403, ExitCode.FAILED),
        ErrorKind.NOT_FOUND: Surfaces(404, "not_found", 4404, ExitCode.CONFIG),
        ErrorKind.GONE: Surfaces(404, "not_found", 4404, ExitCode.INFRA),
        ErrorKind.CONFLICT: Surfaces(409, "conflict", 4409, ExitCode.FAILED),
        ErrorKind.TOO_LARGE: Surfaces(413, "too_large", 4413, ExitCode.CONFIG),
        ErrorKind.RATE_LIMITED: Surfaces(429, "rate_limited", 4429, ExitCode.FAILED),
        ErrorKind.CAPACITY: Surfaces(429, "capacity", 4429, ExitCode.INFRA),
        ErrorKind.UNAVAILABLE: Surfaces(503, "unavailable", 4500, ExitCode.INFRA),
        ErrorKind.INFRA: Surfaces(502, "failed", 4500, ExitCode.INFRA),
        ErrorKind.AGENT: Surfaces(502, "failed", 4500, ExitCode.FAILED),
        ErrorKind.TIMEOUT: Surfaces(504, "failed", 4500, ExitCode.TIMEOUT),
        ErrorKind.INTERNAL: Surfaces(500, "failed", 4500, ExitCode.FAILED),
    }
)

KIND_MEANING: Mapping[ErrorKind, str] = MappingProxyType(
    {
        ErrorKind.BAD_REQUEST: "bad arguments, an unusable path or id",
        ErrorKind.CONFIG: "a configuration file is wrong (names file, key path, line)",
        ErrorKind.UNAUTHORIZED: "no key, or an unknown, malformed or revoked one",
        ErrorKind.FORBIDDEN: "the caller may not do this",
        ErrorKind.NOT_FOUND: "no such thing, or another owner's",
        ErrorKind.GONE: "the sandbox named is not there (never was, or was removed under Cage)",
        ErrorKind.CONFLICT: "the thing exists already or is busy",
        ErrorKind.TOO_LARGE: "a request body over the route's limit",
        ErrorKind.RATE_LIMITED: "too many requests; come back later",
        ErrorKind.CAPACITY: (
            "a sandbox, websocket, turn, session or memory cap is reached; nothing was created"
        ),
        ErrorKind.UNAVAILABLE: "no container engine or no database answers",
        ErrorKind.INFRA: "a sandbox, an image build, a prepare step or the gateway failed",
        ErrorKind.AGENT: "the runner or the model failed",
        ErrorKind.TIMEOUT: "the turn ran past its time limit",
        ErrorKind.INTERNAL: "a failure inside Cage (a tool, a hook, the protocol, a call cycle)",
    }
)

EVENT_CODE_KINDS: Mapping[str, ErrorKind] = MappingProxyType(
    {
        "turn_timeout": ErrorKind.TIMEOUT,
        "invalid_options": ErrorKind.CONFIG,
    }
)
"""Error-event codes that are no error class's: their kind. Any other code (a runner's own:
`runner_failed`, `model_api_error`, ...) is of kind `agent`."""

ERROR_MODULES = (
    "orchestrator.errors",
    "orchestrator.store.errors",
    "orchestrator.store.memory",
    "orchestrator.gateway.server",
    "orchestrator.api.errors",
    "orchestrator.api.caps",
    "orchestrator.api.gate",
    "orchestrator.pipeline.load_gate",
    "orchestrator.cli.snapshot",
    "orchestrator.client.errors",
)
"""Every module that defines error classes (a unit test finds any other)."""

_CLOSE_CODES = {s.ws_code: s.close_code for s in TABLE.values()}


def surfaces(exc: CageError) -> Surfaces:
    """How `exc` shows on each surface, by its class's kind."""
    return TABLE[type(exc).kind]


def close_code(ws_code: str) -> int:
    """The close code after a `session.error` with this code refused a connection (4500 for a code
    no kind has)."""
    return _CLOSE_CODES.get(ws_code, 4500)


def event_kind(code: str) -> ErrorKind:
    """The kind of an error event's `code`."""
    cls = error_class(code)
    if cls is not None:
        return cls.kind
    return EVENT_CODE_KINDS.get(code, ErrorKind.AGENT)


_TURN_PRECEDENCE = (ExitCode.TIMEOUT, ExitCode.INFRA, ExitCode.CONFIG)


def turn_exit_code(codes: Iterable[str]) -> ExitCode:
    """The exit code of a turn that ended in error with these error-event codes: a timeout first,
    then an infrastructure failure, then a configuration one, else `FAILED`."""
    found = {TABLE[event_kind(code)].exit_code for code in codes}
    return next((level for level in _TURN_PRECEDENCE if level in found), ExitCode.FAILED)


def all_error_classes() -> list[type[CageError]]:
    """Every Cage error class, from `ERROR_MODULES`, sorted by code."""
    for module in ERROR_MODULES:
        importlib.import_module(module)
    found: list[type[CageError]] = [CageError]
    stack = [CageError]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                stack.append(sub)
    return sorted(found, key=lambda c: c.code)


def summary(cls: type[CageError]) -> str:
    """The first paragraph of the class's docstring, on one line."""
    return " ".join((cls.__doc__ or cls.__name__).split("\n\n")[0].split())


def document_codes(schema: dict[str, Any]) -> None:
    """`json_schema_extra` of an error event's `code`: each code Cage raises, with its kind, and
    then any other string (a runner's or a hook's own code)."""
    known = [
        {"const": cls.code, "description": f"{cls.kind.value}: {summary(cls)}"} for cls in all_error_classes()
    ]
    known += [
        {"const": code, "description": f"{kind.value}: set by the pipeline, not raised"}
        for code, kind in sorted(EVENT_CODE_KINDS.items())
    ]
    schema["anyOf"] = [*known, {"type": "string", "description": "a runner's or a hook's own code"}]
