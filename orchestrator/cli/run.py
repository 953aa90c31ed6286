"""`cage run`: one agent turn in a container against a directory — the CI job mode, no server.

Exit codes: 0 completed · 1 the agent ended in error · 2 bad usage or assistant config ·
3 sandbox or infrastructure failure (Docker down, image build failed) · 124 timeout ·
130 interrupted (SIGINT/SIGTERM: the turn is cancelled cleanly, its container removed).

The checkout is hostile once the agent had it (docs/security.md, "CI mode"), so a run:

* keeps its own state (database, snapshots, sanitized git configs) in the data dir — `CAGE_DATA_DIR`
  or `$XDG_STATE_HOME/cage` — and refuses a data dir, an `--output-dir` or an app dir (hooks are
  host code) inside the workspace;
* runs the sandbox as `oneshot` whatever the assistant says, labels it with this run's id, and
  removes every box with that label in a `finally` before it looks at the checkout again, so no
  process of the agent outlives the run or writes while the patch is made;
* lets the agent run as the checkout's owner (`sandbox/checkout.py`): no ownership change, ever;
* computes `changes.patch` without running anything the checkout configures (`snapshot.py`) and
  writes artifacts without following links (`outputs.py`).
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Literal

import anyio
import typer
from rich.console import Console

from orchestrator.cli.artifacts import PermissionDecision, TurnSummary
from orchestrator.cli.forkwire import state_dir
from orchestrator.cli.hostfs import is_within, read_named_file
from orchestrator.cli.outputs import ArtifactDir, refuse_inside
from orchestrator.cli.overrides import apply_env, apply_sets
from orchestrator.cli.render import GithubRenderer, JsonlRenderer, Renderer, TextRenderer, dumps
from orchestrator.cli.snapshot import PrivateRepo, Snapshot
from orchestrator.dsl import Assistant
from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.dsl.units import parse_duration
from orchestrator.error_table import ExitCode, turn_exit_code
from orchestrator.errors import NotFound, UsageError, WorkspaceError
from orchestrator.overlap import at_once
from orchestrator.pipeline import (
    CallResult,
    InputMessage,
    TurnHandle,
    TurnInput,
    TurnOptions,
    TurnService,
    new_session_id,
)
from orchestrator.pipeline.permissions import Unattended
from orchestrator.sandbox.checkout import checkout_owner
from orchestrator.sandbox.labels import MANAGED, RUN
from orchestrator.services import Services, open_services
from orchestrator.settings import Settings
from orchestrator.stream import (
    ErrorEvent,
    Event,
    JSONLEncoder,
    LifecycleEvent,
    PermissionResolved,
    SandboxStatus,
)

Output = Literal["text", "jsonl", "github"]
LOCAL_OWNER = "local"
"""The owner of every `cage run` turn: sandboxes, sessions and memory of local runs share it."""
MAX_PROMPT_BYTES = 16 * 2**20


def exit_code_for(result: CallResult, error_codes: Sequence[str], interrupted: bool) -> int:
    """The documented exit code for how the turn ended; a failed turn's comes from the kinds of its
    error events' codes (`turn_exit_code`)."""
    if result.status == "completed":
        return ExitCode.OK
    if result.status == "cancelled" or interrupted:
        return ExitCode.INTERRUPTED
    if result.stop_reason == "timeout":
        return ExitCode.TIMEOUT
    return turn_exit_code(error_codes)


@dataclass
class _Sink:
    """Feeds the renderer and appends events to `events.jsonl` (events arrive stamped)."""

    renderer: Renderer
    events_file: IO[bytes] | None
    echo_status: bool
    events: list[Event] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        self.renderer.feed(event)
        if self.echo_status and isinstance(event, LifecycleEvent) and isinstance(event.props, SandboxStatus):
            sys.stderr.write(f"cage: sandbox {event.props.phase} {event.props.message}\n")
        if self.events_file is not None:
            self.events_file.write(JSONLEncoder().encode(event).encode("utf-8"))
            self.events_file.flush()

    @property
    def error_codes(self) -> list[str]:
        return [e.props.code for e in self.events if isinstance(e, ErrorEvent)]

    @property
    def permissions(self) -> list[PermissionDecision]:
        """The turn's `permission/resolved` events, for `summary.json`."""
        return [
            PermissionDecision(
                request_id=e.props.request_id,
                tool=e.props.tool,
                decision=e.props.decision,
                by=e.props.by,
                rule=e.props.rule,
                message=e.props.message,
            )
            for e in self.events
            if isinstance(e, LifecycleEvent) and isinstance(e.props, PermissionResolved)
        ]


async def _watch_signals(handle: TurnHandle, interrupted: list[bool]) -> None:
    """First signal: graceful interrupt (the runner stops its turn); second: force."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            interrupted.append(True)
            await handle.interrupt(force=len(interrupted) > 1)


@dataclass(frozen=True)
class RunOptions:
    assistant_id: str
    prompt: str
    workspace: Path
    session_id: str
    output: Output
    output_dir: Path | None
    turn_timeout: float | None
    sets: tuple[str, ...]
    env: tuple[str, ...]
    permissions: Unattended = "policy"


def _renderer(output: Output, workspace: Path) -> Renderer:
    if output == "jsonl":
        return JsonlRenderer(sys.stdout)
    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    if output == "github":
        summary = Path(os.environ["GITHUB_STEP_SUMMARY"]) if os.environ.get("GITHUB_STEP_SUMMARY") else None
        if summary is not None and is_within(summary, workspace):  # a link there is the agent's to plant
            sys.stderr.write(f"cage: GITHUB_STEP_SUMMARY {summary} is inside the workspace; not written\n")
            summary = None
        return GithubRenderer(out, err, sys.stdout, summary)
    return TextRenderer(out, err)


def _prepare(services: Services, opts: RunOptions) -> Assistant:
    """The assistant with the command line's `--set`/`--env` applied, pinned in the loader."""
    try:
        assistant = services.loader.get(opts.assistant_id)
    except NotFound as exc:
        raise UsageError(f"no assistant {opts.assistant_id!r} in {services.settings.app_dir}") from exc
    if assistant.sandbox is None:
        if opts.sets or opts.env:
            raise UsageError(f"--set/--env need a sandbox assistant; {opts.assistant_id} has no sandbox.yao")
        return assistant
    spec = apply_env(apply_sets(assistant.sandbox, opts.sets, file=assistant.file("sandbox.yao")), opts.env)
    # CI mode: the box goes with the run, whatever lifecycle the assistant has (nothing outlives it)
    spec = spec.model_copy(update={"lifecycle": Lifecycle.ONESHOT})
    changed = assistant.model_copy(update={"sandbox": spec})
    services.loader.override(changed)
    return changed


async def _follow_turn(
    turns: TurnService, assistant: Assistant, opts: RunOptions, sink: _Sink, interrupted: list[bool]
) -> tuple[str, CallResult]:
    """Start the turn, render its events, answer SIGINT/SIGTERM; its id and result."""
    handle = await turns.start(
        TurnInput(
            assistant_id=assistant.id,
            owner=LOCAL_OWNER,
            session_id=opts.session_id,
            messages=(InputMessage(content=opts.prompt),),
            options=TurnOptions(host_workspace=opts.workspace, turn_timeout=opts.turn_timeout),
        )
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_signals, handle, interrupted)
        async for event in handle.events():
            sink(event)
        result = await handle.result()
        tg.cancel_scope.cancel()
    return handle.turn_id, result


async def run_job(settings: Settings, opts: RunOptions) -> int:
    """Run the turn through the pipeline, render it, write the artifacts; return the exit code.

    Raises:
        ConfigError, UsageError: before anything ran (exit 2).
        EngineUnavailable: no Docker engine (exit 3).
    """
    run_id = uuid.uuid4().hex
    settings = settings.model_copy(update={"sandbox_labels": {**settings.sandbox_labels, RUN: run_id}})
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # before the store makes it
    # no session titles: the pipeline closes as the turn ends, which cancels a title job anyway
    async with open_services(settings, unattended=opts.permissions, titles=False) as services:
        return await _run_turn(settings, services, opts, run_id)  # all of it closed however it ends


async def _run_turn(settings: Settings, services: Services, opts: RunOptions, run_id: str) -> int:
    """`run_job` with the process's services open."""
    assistant = _prepare(services, opts)
    repo = PrivateRepo(settings.data_dir)
    try:
        before = await _snapshot_while(repo, opts.workspace, lambda: _reachable(services, assistant))
        outputs = ArtifactDir(opts.output_dir) if opts.output_dir is not None else None
        events_file = outputs.create("events.jsonl") if outputs is not None else None
        renderer = _renderer(opts.output, opts.workspace)
        sink = _Sink(renderer, events_file, opts.output == "jsonl")
        started = time.monotonic()
        interrupted: list[bool] = []
        try:
            turn_id, result = await _follow_turn(services.turns, assistant, opts, sink, interrupted)
        finally:
            with anyio.CancelScope(shield=True):
                await services.turns.aclose()
                if assistant.sandbox is not None:
                    await _remove_boxes(services, run_id)
            if events_file is not None:
                events_file.close()
        code = exit_code_for(result, sink.error_codes, bool(interrupted))
        after = await anyio.to_thread.run_sync(lambda: repo.take(opts.workspace, keep=before.paths))
        patch = outputs.create("changes.patch") if outputs is not None else None
        try:
            changed = await anyio.to_thread.run_sync(repo.diff, before, after, patch)
        finally:
            if patch is not None:
                patch.close()
    finally:
        repo.close()
    usage = result.usage
    summary = TurnSummary(
        assistant=assistant.id,
        runner=assistant.sandbox.runner.name if assistant.sandbox else None,
        session_id=opts.session_id,
        turn_id=turn_id,
        status=result.status,
        stop_reason=result.stop_reason,
        error=result.error,
        usage=usage,
        cost_usd=usage.cost_usd if usage else None,
        duration_ms=int((time.monotonic() - started) * 1000),
        files_changed=changed,
        files_skipped={**before.skipped, **after.skipped},
        exit_code=code,
        data=result.data,
        metadata=result.metadata,
        permissions=sink.permissions,
    )
    renderer.finish(summary)
    if outputs is not None:
        outputs.write("summary.json", dumps(summary).encode("utf-8"))
        outputs.close()
    if result.status == "error" and result.error and opts.output == "jsonl":
        sys.stderr.write(f"cage: {result.error}\n")
    return code


async def _reachable(services: Services, assistant: Assistant) -> None:
    """The engine answers (a sandbox assistant's), the store's schema is current."""
    if assistant.sandbox is not None:
        await services.backend.ping()
    await services.store.migrate()


async def _snapshot_while(
    repo: PrivateRepo, workspace: Path, beside: Callable[[], Awaitable[None]]
) -> Snapshot:
    """The workspace before the turn, taken in a worker thread while `beside` runs (neither waits
    for the other: 20–30 ms of a run); `beside`'s error first, then the snapshot's. The thread is
    waited for even when cancelled, so the repository is never closed under it."""
    taken: list[Snapshot] = []

    async def take() -> None:
        taken.append(await anyio.to_thread.run_sync(repo.take, workspace))

    await at_once(beside, take)
    return taken[0]


async def _remove_boxes(services: Services, run_id: str) -> None:
    """Remove every sandbox of this run, whatever state the pipeline left it in (and its processes)."""
    try:
        for ref in await services.backend.find({MANAGED: "true", RUN: run_id}):
            await services.backend.remove(ref, force=True)
    except Exception as exc:  # reported, not hidden: the run must not pretend its box is gone
        sys.stderr.write(f"cage: could not remove the sandbox of this run: {exc}\n")
        raise


def _read_prompt(path: Path, workspace: Path) -> str:
    try:
        return read_named_file(path, workspace, limit=MAX_PROMPT_BYTES).decode("utf-8")
    except OSError as exc:
        raise UsageError(f"--prompt-file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"--prompt-file {path}: not UTF-8 text") from exc


def default_data_dir() -> Path:
    """`cage run`'s data dir when `CAGE_DATA_DIR` is unset: Cage's state directory
    (`$XDG_STATE_HOME/cage`), never the current directory, which in CI is the checkout."""
    return Path(state_dir())


def run(
    ctx: typer.Context,
    assistant: Annotated[str, typer.Argument(help="Assistant id, e.g. examples.claude.")],
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Directory mounted as the workspace.")],
    prompt: Annotated[str | None, typer.Option("--prompt", "-p", help="The user message.")] = None,
    prompt_file: Annotated[
        Path | None, typer.Option("--prompt-file", help="Read the message from a file.")
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="text, jsonl or github.")] = "text",
    output_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", help="Write events.jsonl, summary.json, changes.patch here."),
    ] = None,
    timeout: Annotated[str, typer.Option("--timeout", help="Turn time limit: 30m, 90s, 1h.")] = "30m",
    env: Annotated[list[str] | None, typer.Option("--env", help="K=V for the agent's environment.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override sandbox.yao: sandbox.key.path=value.")
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", "--chat", help="Session id; reuse it to continue (--chat: old name)."),
    ] = None,
    permissions: Annotated[
        str,
        typer.Option(
            "--permissions",
            help="Who answers the sandbox.yao permissions policy's ask rules with no one to ask: "
            "policy (its default), deny or allow.",
        ),
    ] = "policy",
) -> None:
    """Run one turn of a sandbox assistant against WORKSPACE (exit codes: see `docs/ci.md`)."""
    if (prompt is None) == (prompt_file is None):
        raise UsageError("give exactly one of --prompt and --prompt-file")
    if output not in ("text", "jsonl", "github"):
        raise UsageError(f"--output {output!r}: expected text, jsonl or github")
    if permissions not in ("policy", "deny", "allow"):
        raise UsageError(f"--permissions {permissions!r}: expected policy, deny or allow")
    if not workspace.is_dir():
        raise UsageError(f"--workspace {workspace}: not a directory")
    try:
        checkout_owner(workspace)
    except WorkspaceError as exc:
        raise UsageError(f"--workspace {workspace}: {str(exc).split(': ', 1)[-1]}") from exc
    try:
        limit = parse_duration(timeout).total_seconds()
    except ValueError as exc:
        raise UsageError(f"--timeout: {exc}") from exc
    opts = RunOptions(
        assistant_id=assistant,
        prompt=prompt if prompt is not None else _read_prompt(Path(prompt_file or ""), workspace.resolve()),
        workspace=workspace.resolve(),
        session_id=session or new_session_id(),
        output=output,  # type: ignore[arg-type]
        output_dir=output_dir.resolve() if output_dir else None,
        turn_timeout=limit or None,
        sets=tuple(set_ or ()),
        env=tuple(env or ()),
        permissions=permissions,  # type: ignore[arg-type]
    )
    settings = Settings(app_dir=ctx.obj["app_dir"])
    if not os.environ.get("CAGE_DATA_DIR"):
        settings = settings.model_copy(update={"data_dir": default_data_dir()})
    refuse_inside(settings.data_dir, opts.workspace, "the data dir (CAGE_DATA_DIR)")
    refuse_inside(
        settings.app_dir,
        opts.workspace,
        "--app (the application directory)",
        "its hooks and connectors run on the host, and the agent could rewrite them during the turn; "
        "load the app from a trusted checkout outside the workspace",
    )
    if opts.output_dir is not None:
        refuse_inside(opts.output_dir, opts.workspace, "--output-dir")
    raise typer.Exit(anyio.run(run_job, settings, opts))
