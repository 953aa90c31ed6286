"""How one codex turn is started: argv, environment and the files written first.

First turn: `codex exec -C <workdir> --json ... [--image=<path>...] -- <prompt>` (each attached
image by its path in the box); later turns resume the thread the first one reported:
`codex exec -C <workdir> resume --json ... -- <thread_id> <prompt>` (`-C` is an option of
`exec`, so it goes before `resume`). `--` keeps a prompt starting with `-` a prompt. A
prompt too long for one argv string (Linux caps each at 128 KiB) is passed as `-` and written to
stdin instead, which codex reads to EOF. Otherwise stdin is `/dev/null`: codex waits for EOF on
any other stdin.

When the turn asks permissions (`TurnRequest.ask_permissions`), the same `codex exec` runs under
`gate_driver.py` (`python3 gate_driver.py --socket NAME -- codex exec ... \
--dangerously-bypass-hook-trust ...`), and `config.toml` gets a `PreToolUse` hook
(`gate_hook.py`) that holds each tool call until Cage answers through the driver. codex's own
approvals stay off (`exec` cannot ask: it has no client to ask). The bypass flag lets the
generated hook run without codex's interactive hook review (otherwise an untrusted hook is
silently skipped). The driver keeps stdin open for answers; a long prompt is then its first
stdin line (`--prompt-stdin`).
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources

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
_HOOK_TRUST = "--dangerously-bypass-hook-trust"
UNASKED_TOOLS = ("update_plan",)
"""Tools the gate driver allows without asking: they have no effect but the to-do list the
client sees (as Claude's TodoWrite and opencode's todowrite are never asked about)."""


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


@functools.cache
def gate_source(name: str) -> str:
    """An in-container gate script (`gate_driver.py`, `gate_hook.py`), shipped as a file."""
    return resources.files("runners.codex.incontainer").joinpath(name).read_text(encoding="utf-8")


def gate_dir(turn: TurnRequest) -> str:
    return f"{turn.state_dir.rstrip('/')}/codex/gate"


def gate_socket(turn: TurnRequest) -> str:
    """The driver's abstract socket name: per turn, so two turns never share one."""
    return "cage-codex-gate-" + re.sub(r"[^A-Za-z0-9_.-]", "_", turn.turn_id)[:80]


def codex_home(turn: TurnRequest) -> str:
    """`CODEX_HOME`: under the turn's HOME, in the workspace, so a recreated container resumes."""
    return f"{turn.home.rstrip('/')}/.codex"


def codex_tmp(turn: TurnRequest) -> str:
    """`TMPDIR`: in the runner's state dir, never an ancestor of `CODEX_HOME` (codex refuses to put
    its helper binaries under the temp dir)."""
    return f"{turn.state_dir.rstrip('/')}/codex/tmp"


def image_flags(turn: TurnRequest) -> tuple[str, ...]:
    """`--image=<path>` for each attached image in the box (codex sends it to the model as an
    image input, on a first turn and after `resume` alike)."""
    return tuple(f"--image={image.path}" for image in turn.images if image.path)


def build_codex_exec(turn: TurnRequest) -> RunnerExec:
    """The exec for one turn.

    Raises:
        RunnerError: an empty prompt, or a connector/MCP server codex cannot use.
        ConfigError: bad `runner.options` (the key path named).
    """
    if not turn.prompt.strip():
        raise RunnerError("codex", "the prompt is empty")
    options = CodexOptions.parse(turn.options)
    asking = turn.ask_permissions
    hook = f"python3 {gate_dir(turn)}/gate_hook.py {gate_socket(turn)}" if asking else None
    config = build_config(turn, options, hook_command=hook)
    flags = (*_FLAGS, _HOOK_TRUST) if asking else _FLAGS
    flags = (*flags, *image_flags(turn))
    argv = ["codex", "exec", "-C", turn.workdir]
    thread_id = turn.resume.get(RESUME_KEY)
    if thread_id:
        argv += ["resume", *flags, "--", thread_id]
    else:
        argv += [*flags, "--"]
    stdin: bytes | None = None
    long_prompt = len(turn.prompt.encode()) > PROMPT_ARGV_LIMIT
    if long_prompt:
        argv.append("-")
        stdin = turn.prompt.encode()
    else:
        argv.append(turn.prompt)
    if asking:
        driver = ["python3", f"{gate_dir(turn)}/gate_driver.py", "--socket", gate_socket(turn)]
        for tool in UNASKED_TOOLS:
            driver += ["--allow", tool]
        if long_prompt:
            driver.append("--prompt-stdin")
            stdin = (json.dumps(turn.prompt) + "\n").encode()
        argv = [*driver, "--", *argv]
    env = {
        **turn.environment,
        "HOME": turn.home,
        "CODEX_HOME": codex_home(turn),
        "TMPDIR": codex_tmp(turn),
        "NO_COLOR": "1",
        **config.secret_env,
    }
    files: tuple[FileWrite, ...] = (
        FileWrite(path=f"{workspace_path(codex_home(turn))}/config.toml", content=config.text, mode=0o600),
        FileWrite(path=f"{workspace_path(codex_tmp(turn))}/.keep", content=""),
    )
    if asking:
        files += tuple(
            FileWrite(path=f"{workspace_path(gate_dir(turn))}/{name}", content=gate_source(name), mode=0o755)
            for name in ("gate_driver.py", "gate_hook.py")
        )
    return RunnerExec(
        argv=tuple(argv),
        env=env,
        stdin=stdin,
        keep_stdin_open=asking,
        files=files,
        workdir=turn.workdir,
        secret_env=tuple(sorted(config.secret_env)),
    )
