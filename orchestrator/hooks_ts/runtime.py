"""`TsRuntime`: runs Yao TypeScript hooks and scripts in a locked-down node process.

`src/index.ts` (and every `src/**.ts` script it calls) is bundled by esbuild (installed by
`scripts/install-hooks-ts.sh` into `orchestrator/hooks_ts/js/node_modules`), then `js/host.js`
runs the requested function in a fresh node process per call:
- Node's permission model: no file writes, no child processes, no worker threads, reads only
  the runtime folder (the code arrives over stdin, never read from disk by node);
- an empty environment (no orchestrator variables, keys or tokens reach it);
- no network where the host can give it its own network namespace (`unshare -rn`);
- a heap cap and a wall-clock timeout; `eval`/`new Function` disabled in the hook's context.
Everything the hook does to the outside (`ctx.Send`, memory, agent calls, the sandbox) is a
JSON-lines request answered by a `Bridge` on this side (docs/hooks-ts.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from orchestrator.redaction import redact

log = structlog.get_logger(__name__)
JS_DIR = Path(__file__).parent / "js"
HOST_JS = JS_DIR / "host.js"
DEFAULT_TIMEOUT = 600.0
"""Seconds one hook may run, agent calls it makes included (Yao's agent.Call default)."""
MAX_LINE = 32 << 20
HEAP_MB = 256
Handler = Callable[..., Awaitable[Any]]


class TsRuntimeError(Exception):
    """The hook could not run or failed; the message is safe to show (redacted, no host paths)."""


@dataclass(frozen=True)
class TsOutcome:
    defined: bool
    value: Any = None


def _esbuild() -> Path | None:
    override = os.environ.get("CAGE_ESBUILD")
    if override:
        return Path(override)
    for candidate in (JS_DIR / "node_modules" / ".bin" / "esbuild",):
        if candidate.exists():
            return candidate
    return None


def _node() -> str | None:
    return os.environ.get("CAGE_NODE") or shutil.which("node")


_UNSHARE: list[str] | None = None


def _isolation_prefix() -> list[str]:
    """`unshare -rn` when this host lets an unprivileged process drop its network, else nothing."""
    global _UNSHARE
    if _UNSHARE is None:
        tool = shutil.which("unshare")
        ok = False
        if tool is not None:
            try:
                ok = subprocess.run([tool, "-rn", "true"], capture_output=True, timeout=10).returncode == 0
            except (OSError, subprocess.SubprocessError):
                ok = False
        _UNSHARE = [tool, "-rn"] if ok and tool else []
        log.info("hooks_ts.isolation", network_namespace=bool(_UNSHARE))
    return _UNSHARE


def available() -> str:
    """ "" when TypeScript hooks can run here, else why not (for errors and test skips)."""
    if _node() is None:
        return "node is not installed (TypeScript hooks need node 20 or later)"
    if _esbuild() is None:
        return "esbuild is not installed: run scripts/install-hooks-ts.sh"
    return ""


def node_argv(node: str, script: Path, readable: Path = JS_DIR) -> list[str]:
    """The locked-down command line that runs `script` (which must sit under `readable`)."""
    return [
        *_isolation_prefix(),
        node,
        "--experimental-permission",
        f"--allow-fs-read={readable}",
        f"--max-old-space-size={HEAP_MB}",
        "--disable-proto=throw",
        "--disallow-code-generation-from-strings",
        "--no-warnings",
        str(script),
    ]


class Bundler:
    """esbuild bundles of TypeScript entry files, cached by path, size and mtime."""

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[tuple[int, int], str]] = {}

    def bundle(self, entry: Path) -> str:
        """The entry file and its relative imports as one CommonJS script (`@yao/*` left as requires).

        Raises:
            TsRuntimeError: esbuild is missing or the source does not compile.
        """
        why = available()
        if why:
            raise TsRuntimeError(why)
        stat = entry.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        cached = self._cache.get(entry)
        if cached is not None and cached[0] == key:
            return cached[1]
        esbuild = _esbuild()
        assert esbuild is not None
        entry = entry.resolve()
        argv = [
            str(esbuild),
            str(entry),
            "--bundle",
            "--format=cjs",
            "--platform=neutral",
            "--target=es2022",
            "--external:@yao/*",
            "--external:@scripts/*",
            "--tree-shaking=false",
            "--log-level=error",
            "--charset=utf8",
        ]
        done = subprocess.run(
            argv,
            capture_output=True,
            timeout=60,
            cwd=entry.parent,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
        if done.returncode != 0:
            text = done.stderr.decode("utf-8", errors="replace").replace(str(entry.parent), "src")
            raise TsRuntimeError(f"{entry.name} does not compile: {redact(text.strip())[:1500]}")
        code = done.stdout.decode("utf-8")
        self._cache[entry] = (key, code)
        return code


class TsRuntime:
    """Runs one exported (or top-level) function of a bundle in a fresh, locked-down node process."""

    def __init__(self, bundler: Bundler | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.bundler = bundler or Bundler()
        self.timeout = timeout

    async def run(
        self,
        *,
        code: str,
        filename: str,
        function: str,
        args: Sequence[Any],
        assistant_id: str,
        ctx: Mapping[str, Any] | None,
        handlers: Mapping[str, Handler],
    ) -> TsOutcome:
        """Run `function(*args)` (with a bridged `ctx` first when `ctx` is given).

        Raises:
            TsRuntimeError: node is missing, the code fails to load, or the function throws.
        """
        node = _node()
        if node is None:
            raise TsRuntimeError(available())
        argv = node_argv(node, HOST_JS)
        start = {
            "t": "start",
            "code": code,
            "filename": filename,
            "fn": function,
            "args": list(args),
            "assistant_id": assistant_id,
            "with_ctx": ctx is not None,
            "ctx": dict(ctx or {}),
        }
        process = await anyio.open_process(argv, cwd=JS_DIR, env={}, stderr=subprocess.PIPE)
        try:
            with anyio.fail_after(self.timeout):
                return await self._serve(process, start, handlers)
        except TimeoutError:
            raise TsRuntimeError(f"{function} did not finish within {self.timeout:g}s") from None
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.CancelScope(shield=True):
                await process.aclose()

    async def _serve(
        self, process: Process, start: Mapping[str, Any], handlers: Mapping[str, Handler]
    ) -> TsOutcome:
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send(json.dumps(start).encode() + b"\n")
        reader = BufferedByteReceiveStream(process.stdout)
        while True:
            try:
                line = await reader.receive_until(b"\n", MAX_LINE)
            except (anyio.EndOfStream, anyio.IncompleteRead):
                why = await _stderr(process)
                raise TsRuntimeError(f"the hook process ended unexpectedly: {why}") from None
            message = json.loads(line)
            kind = message.get("t")
            if kind == "done":
                return TsOutcome(defined=bool(message.get("defined")), value=message.get("v"))
            if kind == "fail":
                raise TsRuntimeError(redact(str(message.get("e", "failed"))))
            if kind == "log":
                log.info(
                    "hooks_ts.log", level=str(message.get("level")), message=redact(str(message.get("msg")))
                )
                continue
            if kind == "call":
                reply = await _answer(message, handlers)
                await process.stdin.send(json.dumps(reply, default=str).encode() + b"\n")


async def _answer(message: Mapping[str, Any], handlers: Mapping[str, Handler]) -> dict[str, Any]:
    call_id = message.get("id")
    method = str(message.get("m"))
    handler = handlers.get(method)
    if handler is None:
        return {"t": "err", "id": call_id, "e": f"ctx: {method} is not available in Cage", "code": 501}
    try:
        value = await handler(*(message.get("a") or []))
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:  # noqa: BLE001 - the hook sees any failure of its call as a JS exception
        return {"t": "err", "id": call_id, "e": redact(f"{type(exc).__name__}: {exc}"), "code": 500}
    return {"t": "ret", "id": call_id, "v": value}


async def _stderr(process: Process) -> str:
    if process.stderr is None:
        return ""
    data = b""
    with anyio.move_on_after(1):
        async for chunk in process.stderr:
            data += chunk
            if len(data) > 4000:
                break
    return redact(data.decode("utf-8", errors="replace").strip()[-1500:]) or f"exit code {process.returncode}"
