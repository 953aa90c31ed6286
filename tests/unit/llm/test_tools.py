"""Coding tools on a `LocalSandbox` over a temp dir: real files, real subprocesses."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import anyio
import pytest
from pydantic import JsonValue

from orchestrator.llm.tools import (
    BashTool,
    EditTool,
    GlobTool,
    GrepTool,
    LocalSandbox,
    LsTool,
    ReadTool,
    ToolContext,
    ToolResult,
    WriteTool,
    coding_tools,
)
from orchestrator.llm.tools.base import TypedTool

CTX = ToolContext(session_id="s", turn_id="t", tool_call_id="c")


async def run(tool: TypedTool[object], **args: JsonValue) -> ToolResult:  # type: ignore[type-var]
    return await tool.run(args, CTX)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "mod.py").write_text("def f():\n    return 1\n\nVALUE = 'needle'\n")
    (tmp_path / "src" / "main.py").write_text("import pkg\nprint('needle')\n")
    (tmp_path / "notes.txt").write_text("\n".join(f"line {i}" for i in range(1, 11)) + "\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config.py").write_text("needle = 1\n")
    return tmp_path


async def test_read_numbers_lines_and_honours_a_range(ws: Path) -> None:
    tool = ReadTool(LocalSandbox(ws))
    whole = await run(tool, path="src/pkg/mod.py")
    assert whole.output.splitlines()[0] == "     1\tdef f():"
    assert whole.output.splitlines()[3] == "     4\tVALUE = 'needle'"
    part = await run(tool, path="notes.txt", offset=3, limit=2)
    assert part.output.splitlines() == ["     3\tline 3", "     4\tline 4", "[lines 3-4 of 10]"]
    missing = await run(tool, path="nope.txt")
    assert missing.is_error and "nope.txt" in missing.output


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "src/../../x", ""])
async def test_paths_outside_the_workspace_are_refused(ws: Path, path: str) -> None:
    result = await run(WriteTool(LocalSandbox(ws)), path=path, content="x")
    assert result.is_error
    assert not (ws.parent / "outside.txt").exists()


async def test_absolute_paths_inside_the_root_and_symlink_escapes(
    ws: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    sandbox = LocalSandbox(ws)
    ok = await run(ReadTool(sandbox), path=str(ws / "notes.txt"), limit=1)
    assert not ok.is_error and "line 1" in ok.output
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("top secret")
    (ws / "link").symlink_to(outside)
    escaped = await run(ReadTool(sandbox), path="link/secret.txt")
    assert escaped.is_error and "top secret" not in escaped.output


async def test_write_then_edit_changes_the_file_on_disk(ws: Path) -> None:
    sandbox = LocalSandbox(ws)
    wrote = await run(WriteTool(sandbox), path="new/dir/a.txt", content="alpha beta alpha\n")
    assert not wrote.is_error and (ws / "new/dir/a.txt").read_text() == "alpha beta alpha\n"
    edit = EditTool(sandbox)
    ambiguous = await run(edit, path="new/dir/a.txt", old_string="alpha", new_string="gamma")
    assert ambiguous.is_error and "2 times" in ambiguous.output
    absent = await run(edit, path="new/dir/a.txt", old_string="delta", new_string="x")
    assert absent.is_error and "not found" in absent.output
    assert (ws / "new/dir/a.txt").read_text() == "alpha beta alpha\n"
    unique = await run(edit, path="new/dir/a.txt", old_string="beta", new_string="BETA")
    assert not unique.is_error and (ws / "new/dir/a.txt").read_text() == "alpha BETA alpha\n"
    every = await run(edit, path="new/dir/a.txt", old_string="alpha", new_string="omega", replace_all=True)
    assert every.metadata["replacements"] == 2
    assert (ws / "new/dir/a.txt").read_text() == "omega BETA omega\n"


async def test_bad_arguments_are_an_error_result(ws: Path) -> None:
    result = await run(EditTool(LocalSandbox(ws)), path="notes.txt", old="x")
    assert result.is_error and "old_string" in result.output


async def test_bash_output_exit_code_and_cap(ws: Path) -> None:
    sandbox = LocalSandbox(ws)
    ok = await run(BashTool(sandbox), command="pwd; echo err >&2")
    assert ok.output.splitlines()[0] == LocalSandbox(ws).root
    assert "[stderr]\nerr" in ok.output and not ok.is_error
    failed = await run(BashTool(sandbox), command="exit 3")
    assert failed.is_error and "[exit code 3]" in failed.output
    capped = await run(BashTool(sandbox, max_output=100), command="seq 1 10000")
    assert capped.metadata["truncated"] is True
    assert "[output truncated" in capped.output and len(capped.output) < 300


async def test_bash_timeout_kills_the_command_and_its_children(ws: Path) -> None:
    started = time.monotonic()
    result = await run(
        BashTool(LocalSandbox(ws)), command="(sleep 30; touch late.txt) & sleep 30", timeout=0.5
    )
    assert time.monotonic() - started < 5
    assert result.is_error and result.metadata["timed_out"] is True
    assert "timed out" in result.output
    await anyio.sleep(0.2)
    assert not (ws / "late.txt").exists()


async def test_glob_matches_across_directories_and_skips_vcs(ws: Path) -> None:
    sandbox = LocalSandbox(ws)
    py = await run(GlobTool(sandbox), pattern="**/*.py")
    assert py.output.splitlines() == ["src/main.py", "src/pkg/mod.py"]
    top = await run(GlobTool(sandbox), pattern="src/*.py")
    assert top.output.splitlines() == ["src/main.py"]
    under = await run(GlobTool(sandbox), pattern="*.py", path="src/pkg")
    assert under.output.splitlines() == ["src/pkg/mod.py"]
    none = await run(GlobTool(sandbox), pattern="*.rs")
    assert none.output == "no files match"


@pytest.mark.parametrize("ripgrep", [False, True])
async def test_grep_output_shape_is_the_same_with_and_without_ripgrep(ws: Path, ripgrep: bool) -> None:
    if ripgrep and shutil.which("rg") is None:
        reason = "ripgrep is not installed here (scripts/ensure-test-tools.sh); the fallback is tested"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    tool = GrepTool(LocalSandbox(ws), use_ripgrep=ripgrep)
    found = await run(tool, pattern="needle")
    assert found.output.splitlines() == ["src/main.py:2:print('needle')", "src/pkg/mod.py:4:VALUE = 'needle'"]
    only = await run(tool, pattern="NEEDLE", ignore_case=True, glob="mod.py")
    assert only.output.splitlines() == ["src/pkg/mod.py:4:VALUE = 'needle'"]
    assert (await run(tool, pattern="absent-thing")).output == "no matches"


async def test_grep_probes_for_ripgrep(ws: Path) -> None:
    tool = GrepTool(LocalSandbox(ws))
    result = await run(tool, pattern="return 1")
    assert result.output == "src/pkg/mod.py:2:    return 1"


async def test_ls_lists_directories_and_sizes(ws: Path) -> None:
    result = await run(LsTool(LocalSandbox(ws)), path="src")
    size = (ws / "src" / "main.py").stat().st_size
    assert result.output.splitlines() == [f"main.py  ({size} bytes)", "pkg/"]


def test_coding_tools_and_read_only_subset(ws: Path) -> None:
    box = coding_tools(LocalSandbox(ws))
    assert box.names == ("bash", "read", "write", "edit", "glob", "grep", "ls")
    assert box.read_only().names == ("read", "glob", "grep", "ls")
    specs = {s.name: s for s in box.specs()}
    assert specs["edit"].input_schema["required"] == ["path", "old_string", "new_string"]
