"""`cage run`: one agent turn in a container against a directory — the CI job mode, no server.

Exit codes: 0 completed · 1 the agent ended in error · 2 bad usage or assistant config ·
3 sandbox or infrastructure failure (Docker down, image build failed) · 124 timeout ·
130 interrupted (SIGINT/SIGTERM: the turn is cancelled cleanly, a oneshot container removed).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import anyio
import typer
from rich.console import Console

from orchestrator.cli.artifacts import HostOwnership, TurnSummary, WorkspaceSnapshot
from orchestrator.cli.overrides import apply_env, apply_sets
from orchestrator.cli.render import GithubRenderer, JsonlRenderer, Renderer, TextRenderer, dumps
from orchestrator.dsl import Assistant
from orchestrator.dsl.units import parse_duration
from orchestrator.errors import NotFound, UsageError
from orchestrator.pipeline import (
    InputMessage,
    PipelineService,
    TurnHandle,
    TurnInput,
    TurnOptions,
    TurnResult,
)
from orchestrator.pipeline.runner_turn import new_chat_id
from orchestrator.services import Services
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.stream import ErrorEvent, Event, JSONLEncoder, LifecycleEvent, SandboxStatus

EXIT_OK, EXIT_AGENT, EXIT_CONFIG, EXIT_INFRA, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 124, 130
Output = Literal["text", "jsonl", "github"]
LOCAL_OWNER = "local"
"""The owner of every `cage run` turn: sandboxes, sessions and memory of local runs share it."""


_CONFIG_CODES = {"ConfigError", "ConfigErrors", "UsageError", "NotFound", "invalid_options"}
_INFRA_CODES = {
    "SandboxError",
    "SandboxNotFound",
    "EngineUnavailable",
    "ImageBuildError",
    "PrepareError",
    "WorkspaceError",
    "CapacityError",
}


def exit_code_for(result: TurnResult, error_codes: Sequence[str], interrupted: bool) -> int:
    """The documented exit code for how the turn ended."""
    if result.status == "completed":
        return EXIT_OK
    if result.status == "cancelled" or interrupted:
        return EXIT_INTERRUPTED
    if result.stop_reason == "timeout" or "turn_timeout" in error_codes:
        return EXIT_TIMEOUT
    if any(code in _INFRA_CODES for code in error_codes):
        return EXIT_INFRA
    if any(code in _CONFIG_CODES for code in error_codes):
        return EXIT_CONFIG
    return EXIT_AGENT


@dataclass
class _Sink:
    """Feeds the renderer and appends events to `events.jsonl` (events arrive stamped)."""

    renderer: Renderer
    events_file: Path | None
    echo_status: bool
    events: list[Event] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        self.renderer.feed(event)
        if self.echo_status and isinstance(event, LifecycleEvent) and isinstance(event.props, SandboxStatus):
            sys.stderr.write(f"cage: sandbox {event.props.phase} {event.props.message}\n")
        if self.events_file is not None:
            with self.events_file.open("a", encoding="utf-8") as fh:
                fh.write(JSONLEncoder().encode(event))

    @property
    def error_codes(self) -> list[str]:
        return [e.props.code for e in self.events if isinstance(e, ErrorEvent)]


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
    chat_id: str
    output: Output
    output_dir: Path | None
    turn_timeout: float | None
    sets: tuple[str, ...]
    env: tuple[str, ...]


def _renderer(output: Output) -> Renderer:
    if output == "jsonl":
        return JsonlRenderer(sys.stdout)
    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    if output == "github":
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        return GithubRenderer(out, err, sys.stdout, Path(summary) if summary else None)
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
    spec = apply_env(apply_sets(assistant.sandbox, opts.sets, file=assistant.path / "sandbox.yao"), opts.env)
    changed = assistant.model_copy(update={"sandbox": spec})
    services.loader.override(changed)
    return changed


async def run_job(settings: Settings, opts: RunOptions) -> int:
    """Run the turn through the pipeline, render it, write the artifacts; return the exit code.

    Raises:
        ConfigError, UsageError: before anything ran (exit 2).
        EngineUnavailable: no Docker engine (exit 3).
    """
    services = Services.from_settings(settings)
    assistant = _prepare(services, opts)
    if assistant.sandbox is not None:
        await services.backend.ping()
    store = Store.from_settings(settings)
    await store.migrate()
    pipeline = PipelineService.from_services(services, store)
    if opts.output_dir is not None:
        opts.output_dir.mkdir(parents=True, exist_ok=True)
        (opts.output_dir / "events.jsonl").write_text("", encoding="utf-8")
    renderer = _renderer(opts.output)
    sink = _Sink(
        renderer, opts.output_dir / "events.jsonl" if opts.output_dir else None, opts.output == "jsonl"
    )
    before = await anyio.to_thread.run_sync(WorkspaceSnapshot.take, opts.workspace)
    ownership = HostOwnership(opts.workspace)
    await anyio.to_thread.run_sync(ownership.lend)
    started = time.monotonic()
    interrupted: list[bool] = []
    try:
        handle = await pipeline.start(
            TurnInput(
                assistant_id=assistant.id,
                owner=LOCAL_OWNER,
                chat_id=opts.chat_id,
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
    finally:
        with anyio.CancelScope(shield=True):
            await pipeline.aclose()
            await store.aclose()
        await anyio.to_thread.run_sync(ownership.give_back)
    code = exit_code_for(result, sink.error_codes, bool(interrupted))
    after = await anyio.to_thread.run_sync(WorkspaceSnapshot.take, opts.workspace)
    patch, changed = await anyio.to_thread.run_sync(before.diff, after)
    usage = result.usage
    summary = TurnSummary(
        assistant=assistant.id,
        runner=assistant.sandbox.runner.name if assistant.sandbox else None,
        chat_id=opts.chat_id,
        turn_id=result.turn_id,
        status=result.status,
        stop_reason=result.stop_reason,
        error=result.error,
        usage=usage,
        cost_usd=usage.cost_usd if usage else None,
        duration_ms=int((time.monotonic() - started) * 1000),
        files_changed=changed,
        exit_code=code,
    )
    renderer.finish(summary)
    if opts.output_dir is not None:
        (opts.output_dir / "summary.json").write_text(dumps(summary), encoding="utf-8")
        (opts.output_dir / "changes.patch").write_text(patch, encoding="utf-8")
    if result.status == "error" and result.error and opts.output == "jsonl":
        sys.stderr.write(f"cage: {result.error}\n")
    return code


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
    chat: Annotated[str | None, typer.Option("--chat", help="Chat id; reuse it to continue.")] = None,
) -> None:
    """Run one turn of a sandbox assistant against WORKSPACE (exit codes: see `docs/ci.md`)."""
    if (prompt is None) == (prompt_file is None):
        raise UsageError("give exactly one of --prompt and --prompt-file")
    if output not in ("text", "jsonl", "github"):
        raise UsageError(f"--output {output!r}: expected text, jsonl or github")
    if not workspace.is_dir():
        raise UsageError(f"--workspace {workspace}: not a directory")
    if prompt_file is not None and not prompt_file.is_file():
        raise UsageError(f"--prompt-file {prompt_file}: no such file")
    try:
        limit = parse_duration(timeout).total_seconds()
    except ValueError as exc:
        raise UsageError(f"--timeout: {exc}") from exc
    opts = RunOptions(
        assistant_id=assistant,
        prompt=prompt if prompt is not None else Path(prompt_file or "").read_text(encoding="utf-8"),
        workspace=workspace.resolve(),
        chat_id=chat or new_chat_id(),
        output=output,  # type: ignore[arg-type]
        output_dir=output_dir.resolve() if output_dir else None,
        turn_timeout=limit or None,
        sets=tuple(set_ or ()),
        env=tuple(env or ()),
    )
    settings = Settings(app_dir=ctx.obj["app_dir"])
    raise typer.Exit(anyio.run(run_job, settings, opts))
