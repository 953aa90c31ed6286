"""File tools: `read` (numbered lines), `write`, and `edit` (exact-string replacement)."""

from __future__ import annotations

from pydantic import Field

from orchestrator.llm.tools.base import ArgsModel, ToolContext, ToolResult, TypedTool
from orchestrator.llm.tools.paths import workspace_path
from orchestrator.llm.tools.sandbox import ToolSandbox

DEFAULT_LIMIT = 2000
MAX_LINE = 2000


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


class ReadArgs(ArgsModel):
    path: str
    """File to read, relative to the workspace root."""
    offset: int = Field(default=1, ge=1)
    """First line to show (1-based)."""
    limit: int = Field(default=DEFAULT_LIMIT, ge=1)
    """How many lines to show."""


def numbered(text: str, offset: int, limit: int) -> tuple[str, int]:
    """`cat -n` style lines `offset..offset+limit-1` and the file's line count."""
    lines = text.splitlines()
    chosen = lines[offset - 1 : offset - 1 + limit]
    out = []
    for number, line in enumerate(chosen, start=offset):
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE] + " [line truncated]"
        out.append(f"{number:>6}\t{line}")
    return "\n".join(out), len(lines)


class ReadTool(TypedTool[ReadArgs]):
    name = "read"
    description = "Read a text file with line numbers; use offset/limit for a range of lines."
    args_model = ReadArgs

    def __init__(self, sandbox: ToolSandbox) -> None:
        self._sandbox = sandbox

    async def call(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        path = workspace_path(args.path, self._sandbox.root, tool=self.name)
        text = _text(await self._sandbox.read_file(path))
        body, total = numbered(text, args.offset, args.limit)
        if total == 0:
            return ToolResult(output=f"({path} is empty)", metadata={"lines": 0})
        if args.offset > total:
            return ToolResult.error(f"offset {args.offset} is past the end of {path} ({total} lines)")
        last = min(total, args.offset + args.limit - 1)
        if last < total or args.offset > 1:
            body += f"\n[lines {args.offset}-{last} of {total}]"
        return ToolResult(output=body, metadata={"lines": total, "path": path})


class WriteArgs(ArgsModel):
    path: str
    """File to create or overwrite, relative to the workspace root."""
    content: str
    """The whole new content."""


class WriteTool(TypedTool[WriteArgs]):
    name = "write"
    description = "Create or overwrite a file with the given content (parent directories are created)."
    read_only = False
    args_model = WriteArgs

    def __init__(self, sandbox: ToolSandbox) -> None:
        self._sandbox = sandbox

    async def call(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        path = workspace_path(args.path, self._sandbox.root, tool=self.name)
        data = args.content.encode()
        await self._sandbox.write_file(path, data)
        return ToolResult(
            output=f"wrote {len(data)} bytes to {path}", metadata={"path": path, "bytes": len(data)}
        )


class EditArgs(ArgsModel):
    path: str
    """File to edit, relative to the workspace root."""
    old_string: str = Field(min_length=1)
    """Exact text to replace; must occur once unless `replace_all`."""
    new_string: str
    """Replacement text."""
    replace_all: bool = False
    """Replace every occurrence instead of requiring exactly one."""


class EditTool(TypedTool[EditArgs]):
    name = "edit"
    description = (
        "Replace an exact string in a file. Fails when old_string is missing, or occurs more than "
        "once and replace_all is false (add surrounding context to make it unique)."
    )
    read_only = False
    args_model = EditArgs

    def __init__(self, sandbox: ToolSandbox) -> None:
        self._sandbox = sandbox

    async def call(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        path = workspace_path(args.path, self._sandbox.root, tool=self.name)
        if args.old_string == args.new_string:
            return ToolResult.error("old_string and new_string are the same; nothing to do")
        text = _text(await self._sandbox.read_file(path))
        count = text.count(args.old_string)
        if count == 0:
            return ToolResult.error(f"old_string not found in {path}")
        if count > 1 and not args.replace_all:
            return ToolResult.error(
                f"old_string occurs {count} times in {path}; give more context or set replace_all"
            )
        updated = text.replace(args.old_string, args.new_string)
        await self._sandbox.write_file(path, updated.encode())
        return ToolResult(
            output=f"replaced {count} occurrence{'s' if count > 1 else ''} in {path}",
            metadata={"path": path, "replacements": count},
        )
