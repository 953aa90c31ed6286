"""Every error Cage raises on purpose. Catch `CageError` to catch them all.

The one tree; most classes live here, the rest in the module of the part that raises them
(named in brackets), and `orchestrator/error_table.py` lists those modules:

CageError
├── ConfigError          file, key_path, line        (sandbox.yao, package.yao, agent.yml, connectors)
│   └── ConfigErrors     errors                        (several found in one pass)
├── SandboxError         sandbox_id
│   ├── SandboxNotFound
│   ├── ImageBuildError  image, log_tail
│   ├── PrepareError     step, stderr_head
│   ├── WorkspaceError   path                          (traversal, bad ids)
│   └── EngineUnavailable                              (no Docker engine answers)
├── CapacityError        scope, limit                  (too many sandboxes; HTTP 429)
│   ├── OwnerTurnsRunning, OwnerSessionsFull              [store/errors.py]
│   ├── MemoryFull                                     [store/memory.py]
│   ├── OwnerCapReached                                [api/caps.py]
│   └── Overloaded                                     [pipeline/load_gate.py]
├── RunnerError          runner, exit_code, stderr_tail
├── ModelError           provider, status, retryable    (a model API call failed, was cut or timed out)
├── ToolError            tool                           (a native-loop tool could not do its job)
├── StreamLimitError     limit                         (a line longer than the cap)
├── ProtocolError        problems                      (an event sequence breaks the stream protocol)
├── CallDepthError       chain, limit                  (delegation / agent calls nested too deep: a cycle)
├── HookError            assistant_id, hook            (a user hook raised or returned something unusable)
├── NotFound
│   └── RecordNotFound   record_kind, record_id        [store/errors.py]
├── Conflict
│   └── EventSequenceError, RecordExists, TurnRunning  [store/errors.py]
├── Forbidden | Unauthorized                            (API-facing)
├── RateLimited
│   └── KeyRateLimited   retry_after                   [api/errors.py]
├── UsageError                                         (bad CLI/API arguments)
├── StoreError           reason                        [store/errors.py]
├── GatewayError                                       [gateway/server.py]
├── BodyTooLarge                                       [api/gate.py]
├── SnapshotError                                      [cli/snapshot.py]
└── CageApiError         status, server_code           [client/errors.py]

Messages are built from fields and never contain secret values: callers pass
stderr tails through `orchestrator.redaction.redact` before they reach an error.

Every class declares its own `code` (stable, snake_case: what error events and the docs carry, never
the class name) and inherits or declares a `kind` (`ErrorKind`); `orchestrator/error_table.py`
derives the HTTP status, the websocket error and close codes and the CLI exit code from the kind.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar


class ErrorKind(enum.StrEnum):
    """What kind of failure an error is; the one input of `orchestrator/error_table.py`."""

    BAD_REQUEST = "bad_request"
    CONFIG = "config"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    GONE = "gone"
    CONFLICT = "conflict"
    TOO_LARGE = "too_large"
    RATE_LIMITED = "rate_limited"
    CAPACITY = "capacity"
    UNAVAILABLE = "unavailable"
    INFRA = "infra"
    AGENT = "agent"
    TIMEOUT = "timeout"
    INTERNAL = "internal"


_BY_CODE: dict[str, type[CageError]] = {}


class CageError(Exception):
    """Root of every error Cage raises on purpose."""

    code: ClassVar[str] = "cage_error"
    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each subclass declares its own `code`, unique among all Cage errors (a taken one is refused)."""
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:  # tests/unit/test_errors.py fails on such a class
            return
        taken = _BY_CODE.get(cls.code)
        if taken is not None and (taken.__module__, taken.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TypeError(f"error code {cls.code!r} of {cls.__qualname__} is taken by {taken.__qualname__}")
        _BY_CODE[cls.code] = cls


_BY_CODE[CageError.code] = CageError


def error_class(code: str) -> type[CageError] | None:
    """The error class whose `code` this is, among those imported so far (None for another code)."""
    return _BY_CODE.get(code)


class ConfigError(CageError):
    """A configuration file is wrong. Names the file, the key path and, when known, the line."""

    code = "config_error"
    kind = ErrorKind.CONFIG

    def __init__(
        self, message: str, *, file: Path | str, key_path: str = "", line: int | None = None
    ) -> None:
        self.file = Path(file)
        self.key_path = key_path
        self.line = line
        self.reason = message
        where = f"{self.file}:{line}" if line is not None else str(self.file)
        super().__init__(f"{where}: {key_path}: {message}" if key_path else f"{where}: {message}")


class ConfigErrors(ConfigError):
    """Several configuration errors found in one pass; `errors` holds them all, the message lists them."""

    code = "config_errors"

    def __init__(self, errors: list[ConfigError]) -> None:
        if not errors:
            raise ValueError("ConfigErrors needs at least one error")
        self.errors = errors
        first = errors[0]
        super().__init__(first.reason, file=first.file, key_path=first.key_path, line=first.line)
        self.args = ("\n".join(str(e) for e in errors),)

    def __str__(self) -> str:
        return str(self.args[0])


class SandboxError(CageError):
    """Something went wrong with a sandbox (container, pod, ...)."""

    code = "sandbox_error"
    kind = ErrorKind.INFRA

    def __init__(self, sandbox_id: str, message: str) -> None:
        self.sandbox_id = sandbox_id
        super().__init__(f"sandbox {sandbox_id}: {message}" if sandbox_id else message)


class SandboxNotFound(SandboxError):
    """The sandbox a request or a turn names is not there (never was, or was removed under it)."""

    code = "sandbox_not_found"
    kind = ErrorKind.GONE

    def __init__(self, sandbox_id: str) -> None:
        super().__init__(sandbox_id, "not found")


class EngineUnavailable(SandboxError):
    """No container engine answers (Docker daemon down, socket missing)."""

    code = "engine_unavailable"
    kind = ErrorKind.UNAVAILABLE

    def __init__(self, message: str) -> None:
        super().__init__("", f"container engine unavailable: {message}")


class ImageBuildError(SandboxError):
    """Building a sandbox image failed; `log_tail` is the end of the build log."""

    code = "image_build_failed"

    def __init__(self, image: str, log_tail: str) -> None:
        self.image = image
        self.log_tail = log_tail
        super().__init__("", f"image build failed for {image}: {log_tail}")


class PrepareError(SandboxError):
    """A prepare step of sandbox.yao failed. `step` is its index in `prepare[]`."""

    code = "prepare_failed"

    def __init__(self, sandbox_id: str, step: int, message: str, stderr_head: str = "") -> None:
        self.step = step
        self.stderr_head = stderr_head
        detail = f": {stderr_head}" if stderr_head else ""
        super().__init__(sandbox_id, f"prepare[{step}]: {message}{detail}")


class WorkspaceError(SandboxError):
    """A path or id would escape or break the workspace."""

    code = "workspace_invalid"
    kind = ErrorKind.BAD_REQUEST

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__("", f"workspace path {path!r}: {message}")


class CapacityError(CageError):
    """A global or per-owner limit is reached; nothing was created."""

    code = "capacity_reached"
    kind = ErrorKind.CAPACITY

    def __init__(self, scope: str, limit: int, *, what: str = "sandbox") -> None:
        self.scope = scope
        self.limit = limit
        super().__init__(f"{what} limit reached for {scope}: at most {limit}")


STDERR_TAIL = 2000
"""Characters of a process's stderr an error or event keeps: its last ones."""


class RunnerError(CageError):
    """A runner (an agent CLI or the native loop) failed: bad options, a non-zero exit, unusable output."""

    code = "runner_error"
    kind = ErrorKind.AGENT

    def __init__(
        self, runner: str, message: str, *, exit_code: int | None = None, stderr_tail: str = ""
    ) -> None:
        self.runner = runner
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail
        code = f" (exit {exit_code})" if exit_code is not None else ""
        tail = f": {stderr_tail}" if stderr_tail else ""
        super().__init__(f"runner {runner}{code}: {message}{tail}")


class ModelError(CageError):
    """A model API call failed for good: an HTTP error after the retry budget, a cut stream, a timeout.

    `status` is the HTTP status when there was one; `retryable` says whether trying again later
    may help (429, 5xx, cuts and timeouts). The message never carries the API key.
    """

    code = "model_error"
    kind = ErrorKind.AGENT

    def __init__(
        self, provider: str, message: str, *, status: int | None = None, retryable: bool = False
    ) -> None:
        self.provider = provider
        self.status = status
        self.retryable = retryable
        code = f" (HTTP {status})" if status is not None else ""
        super().__init__(f"model {provider}{code}: {message}")


class ToolError(CageError):
    """A native-loop tool failed (bad path, missing file, sandbox exec failure); the loop turns it
    into an error tool result for the model."""

    code = "tool_error"

    def __init__(self, tool: str, message: str) -> None:
        self.tool = tool
        super().__init__(f"{tool}: {message}" if tool else message)


class StreamLimitError(CageError):
    """A single output line is longer than the configured cap."""

    code = "line_too_long"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"output line longer than the {limit}-byte cap (settings.max_line_bytes)")


class ProtocolError(CageError):
    """Events that break the stream protocol (validator), or a builder used out of order."""

    code = "protocol_violated"

    def __init__(self, problems: list[str]) -> None:
        if not problems:
            raise ValueError("ProtocolError needs at least one problem")
        self.problems = problems
        super().__init__("stream protocol violated: " + "; ".join(problems))


class CallDepthError(CageError):
    """Entering one more nested call would pass the depth limit; names the whole chain."""

    code = "call_depth_exceeded"

    def __init__(self, chain: Sequence[str], limit: int) -> None:
        self.chain = tuple(chain)
        self.limit = limit
        super().__init__(
            f"call depth limit {limit} reached (a delegation or agent call cycle?): " + " → ".join(chain)
        )


class HookError(CageError):
    """A hook in an assistant's `src/index.py` failed; the message names assistant, hook and cause."""

    code = "hook_error"

    def __init__(self, assistant_id: str, hook: str, message: str) -> None:
        self.assistant_id = assistant_id
        self.hook = hook
        super().__init__(f"assistant {assistant_id}: hook {hook}: {message}")


class UsageError(CageError):
    """Bad arguments to a CLI command or an API call."""

    code = "usage_error"
    kind = ErrorKind.BAD_REQUEST


class NotFound(CageError):
    """No such thing, or one the caller may not see."""

    code = "not_found"
    kind = ErrorKind.NOT_FOUND


class Conflict(CageError):
    """The thing exists or is busy (a running turn, a taken id)."""

    code = "conflict"
    kind = ErrorKind.CONFLICT


class Forbidden(CageError):
    """The caller is known but may not do this."""

    code = "forbidden"
    kind = ErrorKind.FORBIDDEN


class Unauthorized(CageError):
    """No key, or an unknown, malformed or revoked one."""

    code = "unauthorized"
    kind = ErrorKind.UNAUTHORIZED


class RateLimited(CageError):
    """Too many requests in too short a time."""

    code = "rate_limited"
    kind = ErrorKind.RATE_LIMITED
