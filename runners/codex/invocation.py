"""How one codex turn is started: argv, environment and the files written first.

First turn: `codex exec -C <workdir> --json ... -- <prompt>`; later turns resume the thread the
first one reported: `codex exec -C <workdir> resume --json ... -- <thread_id> <prompt>` (`-C` is an
option of `exec`, so it goes before `resume`). `--` keeps a prompt starting with `-` a prompt. A
prompt too long for one argv string (Linux caps each at 128 KiB) is passed as `-` and written to
stdin instead, which codex reads to EOF. Otherwise stdin is `/dev/null`: codex waits for EOF on
any other stdin.
"""

from __future__ import annotations

from orchestrator.errors import RunnerError
from runners.base import FileWrite, RunnerExec, TurnRequest
from runners.codex.config import build_config
from runners.codex.options import CodexOptions

WORKSPACE_ROOT = "/workspace"
PROMPT_ARGV_LIMIT = 100_000
"""Prompts longer than this (UTF-8 bytes) go through stdin."""
RESUME_KEY = "thread_id"
_FLAGS = ("--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--strict-config")
"""`--strict-config`: a config key this codex does not know (a kill switch among them) is an error,
not silently ignored."""


def workspace_path(path: str) -> str:
    """`path` (absolute, inside the workspace) relative to the workspace root.

    Raises:
        RunnerError: the path lies outside the workspace.
    """
    prefix = WORKSPACE_ROOT + "/"
    parts = path.removeprefix(prefix).split("/")
    if not path.startswith(prefix) or ".." in parts:
        raise RunnerError("codex", f"{path!r} must lie inside {WORKSPACE_ROOT}")
    return "/".join(p for p in parts if p)


def codex_home(turn: TurnRequest) -> str:
    """`CODEX_HOME`: under the turn's HOME, in the workspace, so a recreated container resumes."""
    return f"{turn.home.rstrip('/')}/.codex"


def codex_tmp(turn: TurnRequest) -> str:
    """`TMPDIR`: in the runner's state dir, never an ancestor of `CODEX_HOME` (codex refuses to put
    its helper binaries under the temp dir)."""
    return f"{turn.state_dir.rstrip('/')}/codex/tmp"


def build_codex_exec(turn: TurnRequest) -> RunnerExec:
    """The exec for one turn.

    Raises:
        RunnerError: an empty prompt, bad `runner.options`, or a connector/MCP server codex
            cannot use.
    """
    if not turn.prompt.strip():
        raise RunnerError("codex", "the prompt is empty")
    options = CodexOptions.parse(turn.options)
    config = build_config(turn, options)
    argv = ["codex", "exec", "-C", turn.workdir]
    thread_id = turn.resume.get(RESUME_KEY)
    if thread_id:
        argv += ["resume", *_FLAGS, "--", thread_id]
    else:
        argv += [*_FLAGS, "--"]
    stdin: bytes | None = None
    if len(turn.prompt.encode()) > PROMPT_ARGV_LIMIT:
        argv.append("-")
        stdin = turn.prompt.encode()
    else:
        argv.append(turn.prompt)
    env = {
        **turn.environment,
        "HOME": turn.home,
        "CODEX_HOME": codex_home(turn),
        "TMPDIR": codex_tmp(turn),
        "NO_COLOR": "1",
        **config.secret_env,
    }
    files = (
        FileWrite(path=f"{workspace_path(codex_home(turn))}/config.toml", content=config.text, mode=0o600),
        FileWrite(path=f"{workspace_path(codex_tmp(turn))}/.keep", content=""),
    )
    return RunnerExec(
        argv=tuple(argv),
        env=env,
        stdin=stdin,
        files=files,
        workdir=turn.workdir,
        secret_env=tuple(sorted(config.secret_env)),
    )
