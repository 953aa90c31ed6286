"""`HookContext`: the `ctx` a Create or Next hook receives.

It offers `send(message)` (a text or a content message, streamed as protocol events in the
call's thread), `memory.{user,team,chat,context}`, `agent.call/all/any/race`, `sandbox` (exec and
files, when the assistant has one), `mcp` (the tools of the assistant's MCP servers, `HookMcp`),
and the request's ids and metadata. Every method works from
async hooks (`await ctx.send(...)`) and from sync hooks (`ctx.send(...)`, run in a worker thread).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from orchestrator.errors import UsageError
from orchestrator.pipeline.hooks.agents import AgentCaller
from orchestrator.pipeline.hooks.mcp import HookMcp
from orchestrator.pipeline.hooks.memory import HookMemory
from orchestrator.pipeline.hooks.sync import dual
from orchestrator.sandbox.backend import ExecSpec, FileEntry
from orchestrator.sandbox.completion import run_to_end
from orchestrator.sandbox.manager import SandboxLease, SandboxManager
from orchestrator.stream import Emit, Event, TurnBuilder

MAX_EXEC_OUTPUT = 1 << 20
"""Bytes of stdout an `exec` from a hook keeps; the rest is cut (and says so)."""
EXEC_TIMEOUT = 300.0
"""Seconds an `exec` from a hook may run when it names no `timeout`; then it is killed."""


def message_events(builder: TurnBuilder, message: object) -> list[Event]:
    """`ctx.send`: a string, or `{"type": ..., "props": {...}}`, as one complete message.

    Raises:
        UsageError: an unknown message type or missing props.
    """
    if isinstance(message, str):
        return [*builder.text(message), *builder.close_open_messages()]
    if not isinstance(message, Mapping):
        raise UsageError(f"ctx.send takes a string or a message dict, not {type(message).__name__}")
    kind = message.get("type", "text")
    props = message.get("props") or {}
    if not isinstance(props, Mapping):
        raise UsageError("ctx.send: props must be a dict")
    if kind in ("text", "thinking"):
        content = str(props.get("content", ""))
        events = builder.text(content) if kind == "text" else builder.thinking(content)
        return [*events, *builder.close_open_messages()]
    if kind == "error":
        return builder.error(str(props.get("message", "")), str(props.get("code", "hook_error")))
    if kind == "loading":
        if props.get("done"):
            return builder.loading_done()
        return builder.loading(str(props.get("message", "")))
    if kind == "execute":
        tool_id = str(props.get("tool_id") or "hook-tool")
        events = builder.tool_started(tool_id, str(props.get("tool", "hook")), props.get("input"))
        events += builder.tool_finished(
            tool_id, str(props.get("output", "")), is_error=bool(props.get("is_error", False))
        )
        return events
    raise UsageError(f"ctx.send: unsupported message type {kind!r} (text, thinking, error, loading, execute)")


class HookSandbox:
    """`ctx.sandbox`: run commands and read or write files in the assistant's sandbox."""

    def __init__(self, manager: SandboxManager, lease: SandboxLease) -> None:
        self._manager = manager
        self._lease = lease

    @property
    def work_dir(self) -> str:
        return self._lease.work_dir

    def _path(self, path: str) -> str:
        full = posixpath.normpath(posixpath.join(self._lease.work_dir, path))
        mount = self._lease.mount_path.rstrip("/") or "/"
        if full != mount and not full.startswith(mount + "/"):
            raise UsageError(f"ctx.sandbox: {path!r} is outside the workspace {mount}")
        return full

    @dual
    async def exec(
        self,
        command: str | Sequence[str],
        env: Mapping[str, str] | None = None,
        workdir: str = "",
        timeout: float = EXEC_TIMEOUT,  # noqa: ASYNC109 - the command's limit, not this call's
    ) -> dict[str, JsonValue]:
        """Run `command` (a shell string or an argv list) for at most `timeout` seconds; returns
        exit_code (None: killed at the time limit), stdout, stderr and timed_out."""
        argv = ("/bin/sh", "-c", command) if isinstance(command, str) else tuple(command)
        spec = ExecSpec(argv=argv, env=dict(env or {}), workdir=workdir and self._path(workdir))
        async with await self._manager.exec(self._lease, spec) as handle:
            done = await run_to_end(handle, timeout=timeout, max_output=MAX_EXEC_OUTPUT)
        stdout = done.stdout.removesuffix(b"\n").decode("utf-8", errors="replace")
        if done.truncated:
            stdout += "\n[output cut]"
        return {
            "exit_code": done.exit_code,
            "stdout": stdout,
            "stderr": done.stderr.decode("utf-8", errors="replace"),
            "timed_out": done.timed_out,
        }

    @dual
    async def read_file(self, path: str) -> str:
        data = await self._manager.backend.get_file(self._lease.ref, self._path(path))
        return data.decode("utf-8", errors="replace")

    @dual
    async def write_file(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        full = self._path(path)
        entry = FileEntry(
            path=posixpath.basename(full),
            content=content.encode() if isinstance(content, str) else content,
            mode=mode,
            uid=self._lease.uid,
            gid=self._lease.gid,
        )
        await self._manager.backend.put_files(self._lease.ref, posixpath.dirname(full), [entry])


class HookContext:
    """The `ctx` of one call's hooks."""

    def __init__(
        self,
        *,
        assistant_id: str,
        owner: str,
        session_id: str,
        turn_id: str,
        thread_id: str | None,
        metadata: Mapping[str, Any],
        locale: str | None,
        builder: TurnBuilder,
        emit: Emit,
        memory: HookMemory,
        agent: AgentCaller,
        sandbox: HookSandbox | None,
        mcp: HookMcp,
    ) -> None:
        self.assistant_id = assistant_id
        self.owner = owner
        self.chat_id = session_id
        """The session's id under Yao's name for it (hooks written for Yao read `ctx.chat_id`)."""
        self.turn_id = turn_id
        self.request_id = turn_id
        self.thread_id = thread_id
        self.metadata: dict[str, Any] = dict(metadata)
        self.locale = locale
        self.memory = memory
        self.agent = agent
        self.sandbox = sandbox
        self.mcp = mcp
        self._builder = builder
        self._emit = emit

    @dual
    async def send(self, message: object) -> None:
        """Stream a message to the client (and into the turn's saved answer, for text)."""
        await self._emit(message_events(self._builder, message))

    async def stream_text(self, delta: str) -> None:
        """Append to the open text message (Yao's `SendStream`/`Append`), leaving it open."""
        await self._emit(self._builder.text(delta))

    async def end_stream(self) -> None:
        """Close the open message (Yao's `End`)."""
        await self._emit(self._builder.close_open_messages())
