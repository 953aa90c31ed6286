"""`cage run`: one agent turn in a container against a directory, no server.

Exit codes: 0 completed · 1 the agent ended in error · 2 bad usage or assistant config ·
3 sandbox or infrastructure failure · 124 timeout · 130 interrupted (Ctrl-C / SIGINT / SIGTERM).
"""

from __future__ import annotations

import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, TextIO

import anyio
import typer

from orchestrator.dsl.units import parse_duration
from orchestrator.errors import (
    CageError,
    CapacityError,
    ConfigError,
    EngineUnavailable,
    SandboxError,
    UsageError,
)
from orchestrator.pipeline.bridge import StopReason, TurnLimits
from orchestrator.pipeline.resume import JsonResumeStore
from orchestrator.pipeline.runner_turn import RunnerTurnInput, new_chat_id, run_sandbox_turn
from orchestrator.services import Services
from orchestrator.settings import Settings
from orchestrator.stream import Event, JSONLEncoder, RandomIds, SessionEmitter, TurnBuilder

EXIT_OK, EXIT_AGENT, EXIT_CONFIG, EXIT_INFRA, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 124, 130


class _Printer:
    """Stamps events with the session emitter and prints them as JSON lines."""

    def __init__(self, emitter: SessionEmitter, turn_id: str, out: TextIO) -> None:
        self.emitter = emitter
        self.turn_id = turn_id
        self.encoder = JSONLEncoder()
        self.out = out
        self.events: list[Event] = []

    async def __call__(self, batch: Sequence[Event]) -> None:
        for event in batch:
            stamped = self.emitter.stamp(event, turn_id=self.turn_id)
            self.events.append(stamped)
            self.out.write(self.encoder.encode(stamped))
        self.out.flush()


async def _watch_signals(cancel: anyio.Event, interrupted: list[bool]) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            interrupted.append(True)
            cancel.set()


def exit_code_for(exc: CageError) -> int:
    """2 for bad config or usage, 3 for sandbox and infrastructure failures, 1 for the rest."""
    if isinstance(exc, ConfigError | UsageError):
        return EXIT_CONFIG
    if isinstance(exc, SandboxError | CapacityError):
        return EXIT_INFRA
    return EXIT_AGENT


async def _run_turn(
    settings: Settings,
    assistant_id: str,
    prompt: str,
    workspace: Path,
    chat_id: str,
    turn_timeout: float | None,
) -> int:
    services = Services.from_settings(settings)
    assistant = services.loader.get(assistant_id)
    if assistant.sandbox is None:
        raise UsageError(f"assistant {assistant_id} has no sandbox.yao; `cage run` runs sandbox assistants")
    await services.backend.ping()
    turn_id = f"turn-{uuid.uuid4().hex[:12]}"
    printer = _Printer(SessionEmitter(chat_id), turn_id, sys.stdout)
    builder = TurnBuilder(RandomIds(), runner=assistant.sandbox.runner.name)
    cancel = anyio.Event()
    interrupted: list[bool] = []
    await printer(builder.stream_start(assistant.id, assistant_name=assistant.name, chat_id=chat_id))
    inp = RunnerTurnInput(
        assistant, prompt, owner="local", chat_id=chat_id, turn_id=turn_id, host_workspace=workspace
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_signals, cancel, interrupted)
        try:
            result = await run_sandbox_turn(
                inp,
                loader=services.loader,
                manager=services.manager,
                resume=JsonResumeStore(settings.data_dir / "resume.json"),
                builder=builder,
                emit=printer,
                cancel=cancel,
                limits=TurnLimits(turn_timeout=turn_timeout),
            )
        except CageError as exc:
            message = str(exc)
            await printer(builder.error(message, type(exc).__name__))
            await printer(builder.stream_end("error", error=message))
            typer.echo(f"cage: {message}", err=True)
            return exit_code_for(exc)
        finally:
            tg.cancel_scope.cancel()
    outcome = result.outcome
    await printer(builder.stream_end(outcome.status, error=outcome.error, usage=outcome.usage))
    if interrupted or result.stopped is StopReason.CANCELLED:
        return EXIT_INTERRUPTED
    if result.stopped is StopReason.TIMEOUT:
        return EXIT_TIMEOUT
    return EXIT_OK if outcome.status == "completed" else EXIT_AGENT


def run(
    ctx: typer.Context,
    assistant: Annotated[str, typer.Argument(help="Assistant id, e.g. examples.claude.")],
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Directory mounted as the workspace.")],
    prompt: Annotated[str | None, typer.Option("--prompt", "-p", help="The user message.")] = None,
    prompt_file: Annotated[
        Path | None, typer.Option("--prompt-file", help="Read the message from a file.")
    ] = None,
    chat: Annotated[
        str | None, typer.Option("--chat", help="Chat id; reuse it to continue a conversation.")
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="Output format: jsonl.")] = "jsonl",
    timeout: Annotated[str | None, typer.Option("--timeout", help="Turn time limit, e.g. 30m, 90s.")] = None,
) -> None:
    """Run one turn of a sandbox assistant against WORKSPACE, printing protocol events."""
    if (prompt is None) == (prompt_file is None):
        raise UsageError("give exactly one of --prompt and --prompt-file")
    if output != "jsonl":
        raise UsageError(f"--output {output!r}: supported formats: jsonl")
    if not workspace.is_dir():
        raise UsageError(f"--workspace {workspace}: not a directory")
    text = prompt if prompt is not None else Path(prompt_file or "").read_text(encoding="utf-8")
    try:
        limit = parse_duration(timeout).total_seconds() if timeout else None
    except ValueError as exc:
        raise UsageError(f"--timeout: {exc}") from exc
    settings = Settings(app_dir=ctx.obj["app_dir"])
    try:
        code = anyio.run(
            _run_turn, settings, assistant, text, workspace.resolve(), chat or new_chat_id(), limit
        )
    except (ConfigError, UsageError):
        raise
    except (EngineUnavailable, SandboxError) as exc:
        typer.echo(f"cage: {exc}", err=True)
        raise typer.Exit(EXIT_INFRA) from exc
    raise typer.Exit(code)
