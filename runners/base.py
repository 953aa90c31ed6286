"""The runner contract: what every adapter (claude, opencode, codex, yaocode, tai) provides.

An adapter is **pure** (sans-I/O, STYLE R6): `build_exec()` turns a `TurnRequest` into a
`RunnerExec` (argv, env, stdin, files to write first, user, workdir), and its `Translator`
turns output lines into protocol events through the turn's `TurnBuilder`. The bridge in the
orchestrator does the I/O: it writes the files, runs the exec in the sandbox, feeds every
stdout line to `feed()`, and at the end calls `close(exit_code, stderr_tail)` to learn the
turn's `TurnOutcome`. Adapters never import `docker`, the sandbox or the API (import contract).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, JsonValue, SecretStr

from orchestrator.dsl import ConnectorSpec, McpServerSpec
from orchestrator.dsl.package import CompactionSettings, PackageOptions
from orchestrator.errors import ProtocolError
from orchestrator.permissions import Decision, Question, ToolRequest
from orchestrator.stream import Event, StreamStatus, TurnBuilder, Usage

_FROZEN = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

IN_BOX_STATE = ".cage-state"
"""The runners' state directory, relative to the workspace root (CLI homes, generated configs,
prepare markers). Its own name: never the host's `.cage` data dir, which holds the database."""
HOME_SUBDIR = f"{IN_BOX_STATE}/home"
STATE_SUBDIR = f"{IN_BOX_STATE}/runner"


class FileWrite(BaseModel):
    """A file the bridge writes into the workspace before the exec (as the `sandbox` user)."""

    model_config = _FROZEN
    path: str
    """Relative to the workspace root; must not escape it."""
    content: str
    mode: int = 0o644


class RunnerExec(BaseModel):
    """What a runner asks the sandbox to run for one turn."""

    model_config = _FROZEN
    argv: tuple[str, ...]
    env: Mapping[str, str] = Field(default_factory=dict, repr=False)
    """Environment of the exec; may hold the connector key, so never logged (repr hidden)."""
    stdin: bytes | None = None
    """None: `/dev/null` (never an open, unused pipe: every CLI stalls on one)."""
    keep_stdin_open: bool = False
    """Keep a pipe open after `stdin` (Claude's stream-json input, for graceful interrupts).
    The bridge closes it as soon as the translator reports `finished`, and on cancel after
    writing `CancelPolicy.stdin_interrupt`."""
    files: tuple[FileWrite, ...] = ()
    user: str = "sandbox"
    workdir: str = "/workspace"
    secret_env: tuple[str, ...] = ()
    """Names in `env` whose values are secrets (registered with the redactor by the bridge)."""


class CancelPolicy(BaseModel):
    """How to stop the CLI: `signal` to its process group, SIGKILL after `grace_seconds`."""

    model_config = _FROZEN
    signal: int = int(signal.SIGINT)
    grace_seconds: float = 5.0
    stdin_interrupt: bytes | None = None
    """Bytes that ask the CLI itself to interrupt (written to stdin before any signal)."""


class Supports(BaseModel):
    """What a runner can do; shown by the admin API and used to pick features."""

    model_config = _FROZEN
    resume: bool = False
    thinking: bool = False
    text_deltas: bool = False
    usage: bool = False
    cost: bool = False
    mcp: bool = False
    images: bool = False


class ImagePart(BaseModel):
    """An image the user attached (its file is also in the box), for a runner whose CLI takes
    image input (`Supports.images`)."""

    model_config = _FROZEN
    name: str
    media_type: str
    data: str = Field(repr=False)
    """Base64."""
    path: str = ""
    """Where the file is in the box (`<work dir>/attachments/<name>`), for CLIs that read images
    from a path (codex `--image`, opencode `--file`)."""


class TurnRequest(BaseModel):
    """Everything an adapter needs to build one turn. Built by the pipeline."""

    model_config = _FROZEN
    assistant_id: str
    owner: str
    session_id: str
    turn_id: str
    prompt: str
    """The user's message for this turn."""
    images: tuple[ImagePart, ...] = ()
    """Images attached to it, for adapters that support them (`Supports.images`)."""
    history: tuple[Mapping[str, JsonValue], ...] = ()
    """Earlier messages (`{role, content}`), for runners that cannot resume on their own."""
    system_prompt: str = ""
    connector: ConnectorSpec | None = None
    role_models: Mapping[str, str] = Field(default_factory=dict)
    """Models of the other `runner.connectors` roles (`light`, `heavy`) by role, each served by
    the same endpoint as `connector` (the pipeline checks it); the adapter maps the roles its CLI
    has a setting for (`orchestrator.dsl.role_support`)."""
    mcp_servers: tuple[McpServerSpec, ...] = ()
    options: Mapping[str, Any] = Field(default_factory=dict)
    """`runner.options` from sandbox.yao."""
    package_options: PackageOptions = PackageOptions()
    """The package's `options` (request parameters); each adapter maps those its CLI has a
    setting for, the loader refuses the rest (`orchestrator.dsl.option_support`)."""
    compaction: CompactionSettings = CompactionSettings()
    """The package's `compaction` (the native loop's `tai` honours it)."""
    max_turn: int | None = None
    """`mcp.options.max_turn` when the package sets it (`tai`: the turn's round budget)."""
    workdir: str = "/workspace"
    """The agent's working directory inside the sandbox."""
    home: str = f"/workspace/{HOME_SUBDIR}"
    """HOME for the CLI: inside the workspace so a recreated container still resumes."""
    resume: Mapping[str, str] = Field(default_factory=dict)
    """The state the previous turn's translator reported (`Translator.resume_state`)."""
    environment: Mapping[str, str] = Field(default_factory=dict, repr=False)
    """Extra env from sandbox.yao `environment`."""
    model_url: str | None = None
    """Model base URL as seen from inside the sandbox, when it differs from `connector.base_url`."""
    lifecycle: Literal["oneshot", "session", "longrunning", "persistent"] = "oneshot"
    """The sandbox's lifecycle: a long-lived box may keep a CLI server running between turns."""
    state_dir: str = f"/workspace/{STATE_SUBDIR}"
    """Per-runner state (config files, scripts) inside the workspace; adapters use a sub-folder."""
    ask_permissions: bool = False
    """The turn's permission gate asks (`PermissionGate.asks`; the bridge sets it): the adapter
    starts its CLI in a mode that holds each tool call (and question) for Cage, and its
    translator surfaces them as `ControlRequest`s. False: the CLI's permissions stay off."""


class TurnOutcome(BaseModel):
    """How the turn ended, as the translator saw it."""

    model_config = _FROZEN
    status: StreamStatus
    error: str | None = None
    stop_reason: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class PermissionAsk:
    """A tool call the CLI holds mid-turn until Cage decides it (surfaced by a translator)."""

    request: ToolRequest
    reply: Callable[[Decision], bytes]
    """Pure: the bytes the bridge writes to the CLI's stdin to answer with that decision."""


@dataclass(frozen=True, slots=True)
class QuestionAsk:
    """A question the agent puts to its user mid-turn; the answer goes back into its tool result."""

    question: Question
    reply: Callable[[str], bytes]
    """Pure: the stdin bytes carrying the answer text (empty when nobody answered)."""


ControlRequest = PermissionAsk | QuestionAsk
"""What a translator hands the bridge besides events: the bridge asks the turn's gate
concurrently (other output keeps flowing), then writes `reply(...)` to the CLI's stdin."""


@runtime_checkable
class ControlSource(Protocol):
    """A translator that can surface `ControlRequest`s (the bridge drains them after each line)."""

    def take_requests(self) -> list[ControlRequest]:
        """The requests the lines fed since the last call raised, oldest first; clears them."""
        ...


@runtime_checkable
class ResumeRevisions(Protocol):
    """A translator whose `resume_state` costs something to read: it counts the changes of what the
    state is made from, and the bridge reads the state only after a line that moved the count
    (otherwise after every line). A change the count missed is still saved at the turn's end."""

    @property
    def resume_revision(self) -> int:
        """Moves (never back) whenever `resume_state` may have changed."""
        ...


class Translator(Protocol):
    """CLI output lines -> protocol events, through the turn's builder. Holds turn state, no I/O."""

    def feed(self, line: str) -> list[Event]:
        """Translate one stdout line (without its newline). Malformed or unknown lines never raise."""
        ...

    def close(self, exit_code: int | None, stderr_tail: str, *, cancelled: bool = False) -> list[Event]:
        """The process ended (exit_code None: killed/unknown). Emits what is left; sets `outcome`."""
        ...

    @property
    def outcome(self) -> TurnOutcome:
        """Valid after `close()`."""
        ...

    @property
    def finished(self) -> bool:
        """True once the CLI reported the end of its turn (the bridge may kill a CLI that lingers)."""
        ...

    @property
    def resume_state(self) -> dict[str, str]:
        """What the next turn needs to continue this conversation (session / thread ids).

        The bridge reads it after every line: a translator may hand out the same dict while the
        state is unchanged (the bridge then skips comparing it), so callers do not change it."""
        ...


class OutcomeOnClose:
    """The `outcome` every translator keeps alike: its `close()` sets `_outcome`; reading it sooner
    is the caller's bug, a `ProtocolError` whichever runner."""

    _outcome: TurnOutcome | None = None

    @property
    def outcome(self) -> TurnOutcome:
        if self._outcome is None:
            raise ProtocolError([f"{type(self).__name__}.outcome read before close()"])
        return self._outcome


class ControlQueue:
    """A `ControlSource`'s queue: its lines append to `_requests` (a list each instance makes), the
    bridge takes them."""

    _requests: list[ControlRequest]

    def take_requests(self) -> list[ControlRequest]:
        """The requests the lines fed since the last call raised, oldest first; clears them."""
        taken, self._requests = self._requests, []
        return taken


class RunnerAdapter(Protocol):
    """One runner: its image, abilities, how to start a turn and how to read it."""

    name: str
    image: str
    """Runner image name for the image builder (`claude`, `opencode`, `codex`, `tai`, `tools`)."""
    supports: Supports
    cancel: CancelPolicy

    def build_exec(self, turn: TurnRequest) -> RunnerExec: ...

    def translator(self, builder: TurnBuilder, turn: TurnRequest) -> Translator: ...


def connector_key(connector: ConnectorSpec | None) -> str:
    """The connector's API key, or a placeholder the CLIs accept when the server needs none."""
    if connector is None:
        return "cage-no-key"
    key: SecretStr = connector.key
    return key.get_secret_value() or "cage-no-key"


ConnectorKind = Literal["openai", "anthropic"]
