"""`cage-tai`: Cage's native loop as a CLI, for the `tai` runner inside a container.

`cage-tai run` reads one turn (`TaiTurn` JSON) on stdin, runs the loop with tools on local
subprocesses in the work dir, and writes protocol events (unstamped) as JSON lines on stdout:
`stream_start`, the loop's events, `result/summary`, `stream_end`. Logs go to stderr. A turn
with `ask_permissions` keeps reading stdin after the document's line: the loop's gate is a
`StdioGate` (control lines out, answer lines in; `runners.tai.control`).

Exit codes: 0 completed · 1 the turn ended in error · 2 bad input (no events written) ·
130 interrupted (SIGINT/SIGTERM: the loop is cancelled and `stream_end` says `cancelled`).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import BinaryIO

import anyio
from pydantic import SecretStr, ValidationError

from orchestrator.dsl import McpServerSpec
from orchestrator.errors import CageError, ToolError, UsageError
from orchestrator.llm import (
    AgentLoop,
    ChatMessage,
    ClientSettings,
    JsonFileCheckpoints,
    ModelClient,
    ModelOptions,
    client_for,
)
from orchestrator.llm.images import MAX_IMAGE_BYTES
from orchestrator.llm.mcp import McpToolset
from orchestrator.llm.messages import ImageBlock
from orchestrator.llm.tools import LocalSandbox, Tool
from orchestrator.llm.tools.skills import cards_from_dir, with_skills
from orchestrator.logs import configure_logging
from orchestrator.permissions import PermissionGate
from orchestrator.redaction import redact, register_secret
from orchestrator.stream import Event, RandomIds, TurnBuilder, event_json
from runners.native_loop.outcome import loop_status, summary_events
from runners.native_loop.tools import native_tools
from runners.tai.incontainer.gate import StdioGate
from runners.tai.turn import MAX_TURN_BYTES, MCP_ENV_PREFIX, TaiTurn

RUNNER = "tai"
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def read_turn(stream: BinaryIO) -> TaiTurn:
    """The turn document from `stream`.

    Raises:
        UsageError: too large, not JSON, or not a valid turn.
    """
    data = stream.readline(MAX_TURN_BYTES + 1)  # one line: an asking turn's stdin stays open
    if len(data) > MAX_TURN_BYTES:
        raise UsageError(f"the turn document is larger than {MAX_TURN_BYTES} bytes")
    try:
        return TaiTurn.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise UsageError(f"bad turn document: {where}: {first['msg']}") from exc


def client_settings(turn: TaiTurn) -> ClientSettings:
    """Connector settings with the key (and headers) taken from the environment.

    Raises:
        UsageError: the headers variable is not a JSON object of strings.
    """
    model = turn.model
    key = os.environ.get(model.key_env, "")
    register_secret(key)
    headers: dict[str, SecretStr] = {}
    if model.headers_env:
        try:
            raw = json.loads(os.environ.get(model.headers_env, "{}"))
        except ValueError as exc:
            raise UsageError(f"${model.headers_env} is not JSON") from exc
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise UsageError(f"${model.headers_env} must be a JSON object of strings")
        for name, value in raw.items():
            register_secret(value)
            headers[str(name)] = SecretStr(value)
    return ClientSettings(
        provider=model.provider,
        model=model.model,
        base_url=model.base_url,
        key=SecretStr(key),
        timeout=model.timeout,
        max_retries=model.max_retries,
        headers=headers,
    )


async def _messages(turn: TaiTurn) -> list[ChatMessage]:
    """The history (an earlier turn's checkpoint, or the given messages) plus the prompt.

    Raises:
        UsageError: `resume_turn_id` names a checkpoint that is not there.
    """
    history: list[ChatMessage] = []
    if turn.resume_turn_id and turn.checkpoint_dir:
        checkpoint = await JsonFileCheckpoints(turn.checkpoint_dir).load(turn.resume_turn_id)
        if checkpoint is None:
            raise UsageError(f"no checkpoint for turn {turn.resume_turn_id} in {turn.checkpoint_dir}")
        history = list(checkpoint.messages)
    else:
        for message in turn.history:
            make = ChatMessage.user if message.role == "user" else ChatMessage.assistant
            history.append(make(message.content))
    return [*history, _prompt(turn)]


def _prompt(turn: TaiTurn) -> ChatMessage:
    """The user's message, with the attached images the box holds as image parts (an image that is
    gone, not a regular file, or too large is left to the prompt's line naming it)."""
    message = ChatMessage.user(turn.prompt)
    blocks: list[ImageBlock] = []
    for image in turn.images:
        path = Path(image.path)
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_IMAGE_BYTES:
                continue
            data = base64.b64encode(path.read_bytes()).decode()
        except OSError:
            continue
        blocks.append(ImageBlock(media_type=image.media_type, data=data, name=image.name))
    return message.model_copy(update={"content": (*message.content, *blocks)}) if blocks else message


def mcp_specs(turn: TaiTurn) -> list[McpServerSpec]:
    """The turn's MCP servers with their env and header values read from the environment."""
    specs: list[McpServerSpec] = []
    for entry in turn.mcp_servers:
        env = {key: os.environ.get(var, "") for key, var in entry.env_vars.items()}
        headers = {key: os.environ.get(var, "") for key, var in entry.header_vars.items()}
        for value in (*env.values(), *headers.values()):
            register_secret(value)
        specs.append(entry.server.model_copy(update={"env": env, "headers": headers}))
    return specs


def build_loop(
    turn: TaiTurn,
    client: ModelClient,
    root: Path,
    mcp_tools: Sequence[Tool] = (),
    *,
    gate: PermissionGate | None = None,
    summary_client: ModelClient | None = None,
) -> AgentLoop:
    """The loop for `turn`: coding tools on `root` (plus `agent` unless disabled, and the MCP
    servers' allowed tools); `summary_client` (the `light` model) writes compaction summaries."""
    options = turn.options
    hidden = {turn.model.key_env, turn.model.headers_env}
    env = {  # tools never see the model's key nor the MCP servers' secrets
        k: v for k, v in os.environ.items() if k not in hidden and not k.startswith(MCP_ENV_PREFIX)
    }
    skills = cards_from_dir(Path(turn.skills_dir)) if turn.skills_dir else ()
    tools = native_tools(
        client,
        LocalSandbox(root, env=env),
        options,
        runner=RUNNER,
        skills=skills,
        mcp_tools=mcp_tools,
        asks=gate is not None,  # the turn asks Cage: before each tool call, and through `question`
    )
    model = turn.model
    return AgentLoop(
        client,
        tools,
        system=with_skills(turn.system, skills),
        options=ModelOptions(
            max_tokens=model.max_tokens,
            temperature=model.temperature,
            thinking=model.thinking,
            thinking_budget=model.thinking_budget,
            sampling=model.sampling,
        ),
        max_rounds=options.max_rounds,
        parallel_tools=options.parallel_tools,
        max_parallel=options.max_parallel,
        tool_timeout=options.tool_timeout,
        checkpoints=JsonFileCheckpoints(turn.checkpoint_dir) if turn.checkpoint_dir else None,
        compaction=turn.compaction,
        runner=RUNNER,
        gate=gate,
        summary_client=summary_client,
    )


class _LineWriter:
    """Writes events as JSON lines to a binary stream, off the event loop (R12)."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = anyio.wrap_file(out)
        self._lock = anyio.Lock()
        """Events and the gate's control lines share stdout: one whole write at a time."""

    async def __call__(self, batch: Sequence[Event]) -> None:
        if batch:
            await self.write("".join(event_json(e) + "\n" for e in batch))

    async def line(self, text: str) -> None:
        await self.write(text + "\n")

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._out.write(text.encode())
            await self._out.flush()


async def _watch_signals(cancel: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            cancel.set()


async def run_turn(
    turn: TaiTurn, out: BinaryIO, *, cwd: Path | None = None, stdin: BinaryIO | None = None
) -> int:
    """Run one turn, writing its events to `out`; the exit code. An asking turn reads its
    answers from `stdin` (without one, every tool call is refused).

    Raises:
        UsageError: bad headers or a missing resume checkpoint (before any event is written).
    """
    root = Path(turn.workdir) if turn.workdir else (cwd or Path.cwd())
    settings = client_settings(turn)
    messages = await _messages(turn)
    client = client_for(settings)
    summary = (
        client_for(settings.model_copy(update={"model": turn.summary_model})) if turn.summary_model else None
    )
    emit = _LineWriter(out)
    builder = TurnBuilder(RandomIds(), runner=RUNNER)
    cancel = anyio.Event()
    servers = AsyncExitStack()  # the MCP connections (stdio servers are children of this CLI)
    try:
        await emit(builder.stream_start(turn.assistant_id, session_id=turn.session_id))
        try:
            toolset = await servers.enter_async_context(McpToolset.open(mcp_specs(turn)))
        except ToolError as exc:  # a server could not start: the turn would miss some of its tools
            message = str(exc)
            await emit(builder.error(message, "mcp_unavailable"))
            await emit(builder.stream_end("error", error=message))
            return EXIT_ERROR
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_signals, cancel)
            gate: StdioGate | None = None
            if turn.ask_permissions:
                gate = StdioGate(emit.line)
                if stdin is None:
                    gate.close()
                else:
                    tg.start_soon(gate.read_answers, stdin)
            try:
                loop = build_loop(turn, client, root, toolset.tools, gate=gate, summary_client=summary)
                result = await loop.run(
                    messages, builder, cancel, emit=emit, session_id=turn.session_id, turn_id=turn.turn_id
                )
            except CageError as exc:  # e.g. a checkpoint that cannot be written
                message = str(exc)
                await emit(builder.error(message, exc.code))
                await emit(builder.stream_end("error", error=message))
                return EXIT_ERROR
            finally:
                tg.cancel_scope.cancel()
        status, error = loop_status(result)
        await emit(summary_events(builder, result))
        await emit(builder.stream_end(status, error=error, usage=result.usage))
    finally:
        await servers.aclose()  # not under a new shield: the toolset's own scopes must unwind in order
        with anyio.CancelScope(shield=True):
            await client.aclose()
            if summary is not None:
                await summary.aclose()
    if status == "cancelled" or cancel.is_set():
        return EXIT_INTERRUPTED
    return EXIT_OK if status == "completed" else EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `cage-tai` console script."""
    parser = argparse.ArgumentParser(prog="cage-tai", description="Cage's native agent loop as a CLI.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one turn read as JSON from stdin; events on stdout")
    run.add_argument("--log-level", default=os.environ.get("CAGE_TAI_LOG_LEVEL", "WARNING"))
    args = parser.parse_args(argv)
    configure_logging(args.log_level, stream=sys.stderr)
    try:
        turn = read_turn(sys.stdin.buffer)
        code = anyio.run(partial(run_turn, turn, sys.stdout.buffer, stdin=sys.stdin.buffer))
    except UsageError as exc:
        sys.stderr.write(f"cage-tai: {redact(str(exc))}\n")
        raise SystemExit(EXIT_USAGE) from exc
    raise SystemExit(code)


if __name__ == "__main__":
    main()
