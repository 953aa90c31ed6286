"""Finding things: `glob` (file patterns), `grep` (ripgrep, or a Python fallback with the same
output shape) and `ls`. File lists come from `find` in the sandbox; matching happens here."""

from __future__ import annotations

import posixpath
import re

from pydantic import Field

from orchestrator.globs import path_glob
from orchestrator.llm.tools.base import ArgsModel, ToolContext, ToolResult, TypedTool
from orchestrator.llm.tools.paths import workspace_path
from orchestrator.llm.tools.sandbox import ToolSandbox

MAX_RESULTS = 200
MAX_SCAN_BYTES = 1024 * 1024
_SKIP_DIRS = (".git", "node_modules", "__pycache__", ".venv")
_LIST_TIMEOUT = 30.0


def matches(pattern: str, path: str) -> bool:
    """Whether a relative path matches; a pattern without `/` matches the base name anywhere."""
    target = path if "/" in pattern else posixpath.basename(path)
    return path_glob(pattern).match(target) is not None


async def list_files(sandbox: ToolSandbox, base: str, tool: str) -> tuple[list[str], str | None]:
    """Files under `base` (relative to the root), skipping VCS and dependency folders."""
    prune: list[str] = []
    for name in _SKIP_DIRS:
        prune += ["-name", name, "-o"]
    argv = [
        "find",
        base,
        "(",
        "-type",
        "d",
        "(",
        *prune[:-1],
        ")",
        "-prune",
        ")",
        "-o",
        "-type",
        "f",
        "-print",
    ]
    result = await sandbox.exec(argv, timeout=_LIST_TIMEOUT, max_output=4 * 1024 * 1024)
    if result.exit_code != 0 and not result.stdout:
        return [], (result.stderr.strip() or f"{tool}: cannot list {base}")
    files = sorted(posixpath.normpath(line) for line in result.stdout.splitlines() if line)
    return files, None


def _capped(lines: list[str], what: str) -> str:
    if len(lines) <= MAX_RESULTS:
        return "\n".join(lines)
    return "\n".join(lines[:MAX_RESULTS]) + f"\n[{len(lines) - MAX_RESULTS} more {what} not shown]"


class GlobArgs(ArgsModel):
    pattern: str = Field(min_length=1)
    """Glob such as `**/*.py` or `src/*.ts`; without a `/` it matches file names anywhere."""
    path: str = "."
    """Directory to search in, relative to the workspace root."""


class GlobTool(TypedTool[GlobArgs]):
    name = "glob"
    description = "Find files by glob pattern (`**/*.py`); returns matching paths, sorted."
    args_model = GlobArgs

    def __init__(self, sandbox: ToolSandbox) -> None:
        self._sandbox = sandbox

    async def call(self, args: GlobArgs, ctx: ToolContext) -> ToolResult:
        base = workspace_path(args.path, self._sandbox.root, tool=self.name)
        files, problem = await list_files(self._sandbox, base, self.name)
        if problem:
            return ToolResult.error(problem)
        found = [f for f in files if matches(args.pattern, posixpath.relpath(f, base))]
        if not found:
            return ToolResult(output="no files match", metadata={"count": 0})
        return ToolResult(output=_capped(found, "files"), metadata={"count": len(found)})


class GrepArgs(ArgsModel):
    pattern: str = Field(min_length=1)
    """Regular expression to search for."""
    path: str = "."
    """File or directory to search, relative to the workspace root."""
    glob: str | None = None
    """Only search files matching this glob (`*.py`)."""
    ignore_case: bool = False


class GrepTool(TypedTool[GrepArgs]):
    name = "grep"
    description = "Search file contents for a regular expression; returns `path:line:text` lines."
    args_model = GrepArgs

    def __init__(self, sandbox: ToolSandbox, *, use_ripgrep: bool | None = None) -> None:
        self._sandbox = sandbox
        self._rg = use_ripgrep
        """None: find out on first use whether `rg` is installed in the sandbox."""

    async def _has_rg(self) -> bool:
        if self._rg is None:
            probe = await self._sandbox.exec(["sh", "-c", "command -v rg"], timeout=10)
            self._rg = probe.exit_code == 0
        return self._rg

    async def call(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        base = workspace_path(args.path, self._sandbox.root, tool=self.name)
        try:
            regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
        except re.error as exc:
            return ToolResult.error(f"invalid regular expression: {exc}")
        if await self._has_rg():
            lines, problem = await self._ripgrep(args, base)
        else:
            lines, problem = await self._scan(args, base, regex)
        if problem:
            return ToolResult.error(problem)
        if not lines:
            return ToolResult(output="no matches", metadata={"count": 0})
        return ToolResult(output=_capped(lines, "matches"), metadata={"count": len(lines)})

    async def _ripgrep(self, args: GrepArgs, base: str) -> tuple[list[str], str | None]:
        argv = ["rg", "--line-number", "--no-heading", "--with-filename", "--color", "never"]
        argv += ["--max-columns", "500", "--ignore-case"] if args.ignore_case else ["--max-columns", "500"]
        if args.glob:
            argv += ["--glob", args.glob]
        result = await self._sandbox.exec([*argv, "-e", args.pattern, "--", base], timeout=_LIST_TIMEOUT)
        if result.exit_code not in (0, 1):
            return [], result.stderr.strip() or "grep failed"
        lines = [
            posixpath.normpath(line.split(":", 1)[0]) + ":" + line.split(":", 1)[1]
            for line in result.stdout.splitlines()
            if ":" in line
        ]
        return sorted(lines, key=_line_key), None

    async def _scan(self, args: GrepArgs, base: str, regex: re.Pattern[str]) -> tuple[list[str], str | None]:
        files, problem = await list_files(self._sandbox, base, self.name)
        if problem:
            return [], problem
        lines: list[str] = []
        for path in files:
            if args.glob and not matches(args.glob, posixpath.relpath(path, base)):
                continue
            data = await self._sandbox.read_file(path)
            if len(data) > MAX_SCAN_BYTES or b"\x00" in data[:8000]:
                continue  # large or binary: ripgrep skips binaries too
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
                if regex.search(line):
                    lines.append(f"{path}:{number}:{line[:500]}")
            if len(lines) > MAX_RESULTS * 5:
                break
        return lines, None


def _line_key(line: str) -> tuple[str, int]:
    path, _, rest = line.partition(":")
    number = rest.partition(":")[0]
    return path, int(number) if number.isdigit() else 0


class LsArgs(ArgsModel):
    path: str = "."
    """Directory to list, relative to the workspace root."""


class LsTool(TypedTool[LsArgs]):
    name = "ls"
    description = "List a directory: sub-directories end with `/`, files show their size."
    args_model = LsArgs

    def __init__(self, sandbox: ToolSandbox) -> None:
        self._sandbox = sandbox

    async def call(self, args: LsArgs, ctx: ToolContext) -> ToolResult:
        base = workspace_path(args.path, self._sandbox.root, tool=self.name)
        argv = ["find", base, "-mindepth", "1", "-maxdepth", "1", "-printf", "%y\t%s\t%f\n"]
        result = await self._sandbox.exec(argv, timeout=_LIST_TIMEOUT)
        if result.exit_code != 0:
            return ToolResult.error(result.stderr.strip() or f"cannot list {base}")
        entries: list[str] = []
        for line in sorted(result.stdout.splitlines(), key=lambda s: s.split("\t")[-1]):
            kind, size, name = [*line.split("\t", 2), "", ""][:3]
            entries.append(f"{name}/" if kind == "d" else f"{name}  ({size} bytes)" if kind == "f" else name)
        return ToolResult(
            output=_capped(entries, "entries") or "(empty directory)", metadata={"count": len(entries)}
        )
