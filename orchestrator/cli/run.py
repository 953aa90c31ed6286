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
import uuid
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
from orchestrator.errors import CageError, CapacityError, ConfigError, NotFound, SandboxError, UsageError
from orchestrator.pipeline.bridge import BridgeResult, StopReason, TurnLimits
from orchestrator.pipeline.resume import JsonResumeStore
from orchestrator.pipeline.runner_turn import RunnerTurnInput, new_chat_id, run_sandbox_turn
from orchestrator.services import Services
from orchestrator.settings import Settings
from orchestrator.stream import (
    Event,
    JSONLEncoder,
    LifecycleEvent,
    RandomIds,
    SandboxStatus,
    SessionEmitter,
    TurnBuilder,
)

EXIT_OK, EXIT_AGENT, EXIT_CONFIG, EXIT_INFRA, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 124, 130
Output = Literal["text", "jsonl", "github"]


def exit_code_for(exc: CageError) -> int:
    """2 for bad config or usage, 3 for sandbox and infrastructure failures, 1 for the rest."""
    if isinstance(exc, ConfigError | UsageError):
        return EXIT_CONFIG
    if isinstance(exc, SandboxError | CapacityError):
        return EXIT_INFRA
    return EXIT_AGENT


@dataclass
class _Sink:
    """Stamps events, feeds the renderer, and appends them to `events.jsonl` when asked."""

    emitter: SessionEmitter
    turn_id: str
    renderer: Renderer
    events_file: Path | None
    echo_status: bool
    events: list[Event] = field(default_factory=list)

    async def __call__(self, batch: Sequence[Event]) -> None:
        encoder = JSONLEncoder()
        lines: list[str] = []
        for event in batch:
            stamped = self.emitter.stamp(event, turn_id=self.turn_id)
            self.events.append(stamped)
            self.renderer.feed(stamped)
            lines.append(encoder.encode(stamped))
            if (
                self.echo_status
                and isinstance(stamped, LifecycleEvent)
                and isinstance(stamped.props, SandboxStatus)
            ):
                sys.stderr.write(f"cage: sandbox {stamped.props.phase} {stamped.props.message}\n")
        if self.events_file is not None and lines:
            with self.events_file.open("a", encoding="utf-8") as fh:
                fh.writelines(lines)


async def _watch_signals(cancel: anyio.Event, interrupted: list[bool]) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            interrupted.append(True)
            cancel.set()


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
    try:
        assistant = services.loader.get(opts.assistant_id)
    except NotFound as exc:
        raise UsageError(f"no assistant {opts.assistant_id!r} in {services.settings.app_dir}") from exc
    if assistant.sandbox is None:
        raise UsageError(
            f"assistant {opts.assistant_id} has no sandbox.yao; `cage run` runs sandbox assistants"
        )
    spec = apply_env(apply_sets(assistant.sandbox, opts.sets, file=assistant.path / "sandbox.yao"), opts.env)
    return assistant.model_copy(update={"sandbox": spec})


def _exit_code(result: BridgeResult, interrupted: bool) -> int:
    if interrupted or result.stopped is StopReason.CANCELLED:
        return EXIT_INTERRUPTED
    if result.stopped is StopReason.TIMEOUT:
        return EXIT_TIMEOUT
    return EXIT_OK if result.outcome.status == "completed" else EXIT_AGENT


async def run_job(settings: Settings, opts: RunOptions) -> int:
    """Run the turn, render it, write the artifacts; return the exit code.

    Raises:
        ConfigError, UsageError, NotFound: before anything ran (exit 2).
        EngineUnavailable: no Docker engine (exit 3).
    """
    services = Services.from_settings(settings)
    assistant = _prepare(services, opts)
    assert assistant.sandbox is not None
    await services.backend.ping()
    turn_id = f"turn-{uuid.uuid4().hex[:12]}"
    if opts.output_dir is not None:
        opts.output_dir.mkdir(parents=True, exist_ok=True)
        (opts.output_dir / "events.jsonl").write_text("", encoding="utf-8")
    renderer = _renderer(opts.output)
    sink = _Sink(
        SessionEmitter(opts.chat_id),
        turn_id,
        renderer,
        opts.output_dir / "events.jsonl" if opts.output_dir else None,
        echo_status=opts.output == "jsonl",
    )
    builder = TurnBuilder(RandomIds(), runner=assistant.sandbox.runner.name)
    before = await anyio.to_thread.run_sync(WorkspaceSnapshot.take, opts.workspace)
    ownership = HostOwnership(opts.workspace)
    await anyio.to_thread.run_sync(ownership.lend)
    started = time.monotonic()
    cancel, interrupted = anyio.Event(), list[bool]()
    await sink(builder.stream_start(assistant.id, assistant_name=assistant.name, chat_id=opts.chat_id))
    error: str | None = None
    code = EXIT_AGENT
    result: BridgeResult | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_signals, cancel, interrupted)
            try:
                result = await run_sandbox_turn(
                    RunnerTurnInput(
                        assistant,
                        opts.prompt,
                        owner="local",
                        chat_id=opts.chat_id,
                        turn_id=turn_id,
                        host_workspace=opts.workspace,
                    ),
                    loader=services.loader,
                    manager=services.manager,
                    resume=JsonResumeStore(settings.data_dir / "resume.json"),
                    builder=builder,
                    emit=sink,
                    cancel=cancel,
                    limits=TurnLimits(turn_timeout=opts.turn_timeout),
                )
            except CageError as exc:
                error = str(exc)
                code = exit_code_for(exc)
                await sink(builder.error(error, type(exc).__name__))
                await sink(builder.stream_end("error", error=error))
            finally:
                tg.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(ownership.give_back)
    if result is not None:
        outcome = result.outcome
        await sink(builder.stream_end(outcome.status, error=outcome.error, usage=outcome.usage))
        code, error = _exit_code(result, bool(interrupted)), outcome.error
    after = await anyio.to_thread.run_sync(WorkspaceSnapshot.take, opts.workspace)
    patch, changed = await anyio.to_thread.run_sync(before.diff, after)
    usage = result.outcome.usage if result else None
    summary = TurnSummary(
        assistant=assistant.id,
        runner=assistant.sandbox.runner.name,
        chat_id=opts.chat_id,
        turn_id=turn_id,
        status=result.outcome.status if result else "error",
        stop_reason=result.outcome.stop_reason if result else None,
        error=error,
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
