"""`ClaudeAdapter`: runs Claude Code 2.1.197 headless with stream-json in and out.

The exec (sans-I/O, STYLE R6): `claude -p --input-format stream-json --output-format
stream-json --include-partial-messages --verbose`, started through a `sh` launcher that picks
`--session-id` or `--resume` (see `runners.claude.session`), with the user message as one JSON
line on a stdin pipe the bridge keeps open. The bridge must close that pipe once the translator
reports `finished` (the CLI waits for the next message until EOF), and on cancel write
`cancel.stdin_interrupt` first: Claude Code then stops the turn itself, reports
`result/error_during_execution` and exits once stdin is closed; SIGINT and a kill follow only if
it does not.

When the turn asks Cage (`TurnRequest.ask_permissions`), the CLI runs in `--permission-mode
default` with `--permission-prompt-tool stdio` and a settings file of `ask` rules (see
`runners.claude.permissions`): every tool call with an effect comes to the translator as a
`can_use_tool` control request, and the bridge writes the answer to the same stdin pipe.
Otherwise its question tool (`AskUserQuestion`) is not offered (`--disallowedTools`): without
the control channel no one could answer it (docs/permissions.md, "Questions").
"""

from __future__ import annotations

import json
import signal
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from orchestrator.errors import RunnerError
from orchestrator.stream import TurnBuilder
from runners.base import CancelPolicy, FileWrite, ImagePart, RunnerExec, Supports, TurnRequest
from runners.claude.environment import claude_env
from runners.claude.mcp import allowlist_hooks, mcp_config, server_name, with_allowlist
from runners.claude.options import ClaudeOptions
from runners.claude.permissions import ASKING_MODE, PROMPT_TOOL_FLAGS, QUESTION_TOOL, permission_settings
from runners.claude.session import LAUNCHER, LAUNCHER_NAME, claude_session_id
from runners.claude.translator import INTERRUPT_REQUEST_ID, ClaudeTranslator

STREAM_FLAGS: tuple[str, ...] = (
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--include-partial-messages",
    "--verbose",
)
"""`--verbose` is required by stream-json output; partial messages give text deltas."""

STATE_SUBDIR = "claude"
"""The adapter's folder under `TurnRequest.state_dir` (system prompt, MCP config)."""

INTERRUPT = (
    json.dumps(
        {"type": "control_request", "request_id": INTERRUPT_REQUEST_ID, "request": {"subtype": "interrupt"}},
        separators=(",", ":"),
    ).encode()
    + b"\n"
)
"""The stdin line that makes Claude Code interrupt the running turn (reference/clis.md §4)."""


def user_line(prompt: str, images: Sequence[ImagePart] = ()) -> bytes:
    """The stream-json input line carrying one user message (its images as image blocks)."""
    content: str | list[dict[str, Any]] = prompt
    if images:
        content = [{"type": "text", "text": prompt}] + [
            {"type": "image", "source": {"type": "base64", "media_type": i.media_type, "data": i.data}}
            for i in images
        ]
    message = {"type": "user", "message": {"role": "user", "content": content}}
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class ClaudeAdapter:
    """The `claude` runner: Claude Code CLI inside the `cage/claude` image."""

    name = "claude"
    image = "claude"
    supports = Supports(
        resume=True, thinking=True, text_deltas=True, usage=True, cost=True, mcp=True, images=True
    )
    cancel = CancelPolicy(signal=int(signal.SIGINT), grace_seconds=5.0, stdin_interrupt=INTERRUPT)

    def __init__(self, *, workspace_root: str = "/workspace") -> None:
        self._root = PurePosixPath(workspace_root)

    def build_exec(self, turn: TurnRequest) -> RunnerExec:
        """The exec of one turn: launcher argv, env (key only there), stdin line, config files.

        Raises:
            RunnerError: an OpenAI-type connector, or state folders outside the workspace.
            ConfigError: a bad value in `runner.options`.
        """
        options = ClaudeOptions.parse(turn.options)
        model = options.model or (turn.connector.model if turn.connector is not None else None) or None
        env, secret = claude_env(
            home=turn.home,
            connector=turn.connector,
            model_url=turn.model_url,
            model=model,
            extra=turn.environment,
            roles=turn.role_models,
        )
        state = PurePosixPath(turn.state_dir) / STATE_SUBDIR
        files: list[FileWrite] = []
        mode: str = options.permission_mode
        if turn.ask_permissions and mode != "plan":
            mode = ASKING_MODE
        flags = [*STREAM_FLAGS, "--permission-mode", mode]
        if turn.ask_permissions:
            path = state / "permissions.json"
            settings = permission_settings([server_name(s) for s in turn.mcp_servers])
            settings = with_allowlist(settings, turn.mcp_servers)
            files.append(FileWrite(path=self._relative(path), content=settings))
            flags += [*PROMPT_TOOL_FLAGS, "--settings", str(path)]
        elif allowlist_hooks(turn.mcp_servers):  # MCP tool allowlists, enforced by a hook
            path = state / "mcp-allowlist.json"
            files.append(FileWrite(path=self._relative(path), content=with_allowlist("{}", turn.mcp_servers)))
            flags += ["--settings", str(path)]
        if model:
            flags += ["--model", model]
        if options.max_turns is not None:
            flags += ["--max-turns", str(options.max_turns)]
        allowed = list(options.allowed_tools)
        if turn.mcp_servers:
            config = mcp_config(turn.mcp_servers)
            path = state / "mcp.json"
            files.append(FileWrite(path=self._relative(path), content=config.text, mode=0o600))
            env.update(config.env)
            secret = (*secret, *sorted(config.env))
            flags += ["--mcp-config", str(path)]
            allowed += [rule for rule in config.allowed_tools if rule not in allowed]
        # Strict even without servers: an `.mcp.json` the agent wrote into the workspace must
        # not start servers on the next turn.
        flags.append("--strict-mcp-config")
        if turn.system_prompt:
            path = state / "system-prompt.md"
            files.append(FileWrite(path=self._relative(path), content=turn.system_prompt))
            flags += ["--append-system-prompt-file", str(path)]
        disallowed = list(options.disallowed_tools)
        if not turn.ask_permissions and QUESTION_TOOL not in disallowed:
            disallowed.append(QUESTION_TOOL)  # nobody would get the question: not offered
        if disallowed:
            flags += ["--disallowedTools", *disallowed]
        if allowed:
            flags += ["--allowedTools", *allowed]
        sid = claude_session_id(turn.assistant_id, turn.session_id, turn.resume)
        return RunnerExec(
            argv=("sh", "-c", LAUNCHER, LAUNCHER_NAME, sid, *flags),
            env=env,
            stdin=user_line(turn.prompt, turn.images),
            keep_stdin_open=True,
            files=tuple(files),
            user="sandbox",
            workdir=turn.workdir,
            secret_env=secret,
        )

    def translator(self, builder: TurnBuilder, turn: TurnRequest) -> ClaudeTranslator:
        sid = claude_session_id(turn.assistant_id, turn.session_id, turn.resume)
        return ClaudeTranslator(builder, session_id=sid)

    def _relative(self, path: PurePosixPath) -> str:
        """`path` relative to the workspace root, as `FileWrite.path` wants it."""
        try:
            relative = path.relative_to(self._root)
        except ValueError:
            raise RunnerError(
                self.name, f"state folder {str(path.parent)!r} is outside the workspace {str(self._root)!r}"
            ) from None
        if ".." in relative.parts:
            raise RunnerError(self.name, f"state path {str(path)!r} escapes the workspace")
        return str(relative)
