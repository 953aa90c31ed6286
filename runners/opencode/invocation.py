"""How one opencode turn is started: argv, environment, stdin and the files written first.

Two drives (chosen by `runner.options.drive`, by default from the lifecycle):

* `run` (oneshot boxes): `opencode run --format json --thinking [--session <id>] -- <prompt>`.
  `--` keeps a prompt starting with `-` a prompt; a prompt too long for one argv string (Linux
  caps each at 128 KiB) goes to stdin instead, which `opencode run` reads to EOF and appends to
  the (then empty) message. Otherwise stdin is `/dev/null`: opencode waits for EOF on any other.
* `serve` (session / longrunning / persistent boxes): `python3 serve_driver.py ...` with the
  prompt on stdin; the driver keeps one `opencode serve` per container alive between turns,
  so warm turns skip opencode's ~2.5 s start-up, and streams text deltas and running tools.

When the turn asks permissions (`TurnRequest.ask_permissions`) the drive is always `serve`:
`opencode run` answers every "ask" itself by rejecting it, while the server emits
`permission.asked` and waits for a reply. The driver then runs with `--control`: stdin stays
open, its first line is the prompt (JSON), the later ones are Cage's answers.

Each attached image goes with the message as a file part by its path in the box (`run --file`,
the driver's `--file MIME PATH`); opencode reads it there and sends it to a model whose entry
declares image input (`config.py`: the connector's `capabilities.vision`).

`--title` is always given: without one opencode spends an extra model call on a title. The model
is always named too: a resumed session otherwise keeps the model of its first prompt.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from orchestrator.errors import RunnerError
from runners.base import FileWrite, RunnerExec, TurnRequest
from runners.opencode.config import build_config
from runners.opencode.environment import build_env
from runners.opencode.layout import Layout
from runners.opencode.options import DriveMode, OpencodeOptions

PROMPT_ARGV_LIMIT = 100_000
"""Prompts longer than this (UTF-8 bytes) go through stdin in `run` mode."""
RESUME_KEY = "session_id"
PLUGIN_LOCK = '{"lockfileVersion":3,"packages":{"":{"dependencies":{"@opencode-ai/plugin":"*"}}}}\n'


@functools.cache
def driver_source() -> str:
    """The serve driver's source, shipped as a file into the sandbox (a package resource)."""
    driver = resources.files("runners.opencode.incontainer").joinpath("serve_driver.py")
    return driver.read_text(encoding="utf-8")


def drive_for(turn: TurnRequest, options: OpencodeOptions) -> DriveMode:
    """`run` or `serve` for this turn (always `serve` when Cage decides tool calls)."""
    if turn.ask_permissions:
        return "serve"
    if options.drive != "auto":
        return options.drive
    return "run" if turn.lifecycle == "oneshot" else "serve"


def title_for(turn: TurnRequest) -> str:
    return f"cage {turn.assistant_id} {turn.session_id}"


def control_prompt(prompt: str) -> bytes:
    """The driver's first stdin line in `--control` mode."""
    return (json.dumps(prompt) + "\n").encode()


def _files(turn: TurnRequest, layout: Layout, config_text: str, drive: DriveMode) -> tuple[FileWrite, ...]:
    files = [
        FileWrite(path=layout.relative(layout.config_file), content=config_text, mode=0o600),
        FileWrite(path=layout.relative(f"{layout.plugin_dir}/package-lock.json"), content=PLUGIN_LOCK),
        FileWrite(path=layout.relative(f"{layout.plugin_dir}/node_modules/.cage-keep"), content=""),
    ]
    if turn.system_prompt.strip():
        files.append(FileWrite(path=layout.relative(layout.instructions_file), content=turn.system_prompt))
    if drive == "serve":
        files.append(FileWrite(path=layout.relative(layout.driver_file), content=driver_source(), mode=0o755))
    return tuple(files)


def _run_argv(
    turn: TurnRequest, options: OpencodeOptions, model_ref: str
) -> tuple[tuple[str, ...], bytes | None]:
    argv = [
        "opencode",
        "run",
        "--format",
        "json",
        "--thinking",
        "--title",
        title_for(turn),
        "--model",
        model_ref,
    ]
    argv += _turn_flags(turn, options)
    for image in turn.images:
        if image.path:
            argv += ["--file", image.path]
    if len(turn.prompt.encode()) > PROMPT_ARGV_LIMIT:
        return tuple(argv), turn.prompt.encode()
    return (*argv, "--", turn.prompt), None


def _turn_flags(turn: TurnRequest, options: OpencodeOptions) -> list[str]:
    """`--session` (the one to resume), `--agent`, `--variant`: spelled alike by `opencode run` and
    the serve driver."""
    flags: list[str] = []
    session = turn.resume.get(RESUME_KEY)
    if session:
        flags += ["--session", session]
    if options.agent:
        flags += ["--agent", options.agent]
    if options.variant:
        flags += ["--variant", options.variant]
    return flags


def _serve_argv(
    turn: TurnRequest, options: OpencodeOptions, layout: Layout, model_ref: str
) -> tuple[str, ...]:
    argv = [
        "python3",
        layout.driver_file,
        "--port",
        str(options.serve_port),
        "--workdir",
        turn.workdir,
        "--state",
        layout.state,
        "--config",
        layout.config_file,
        "--title",
        title_for(turn),
        "--model",
        model_ref,
        "--provider",
        model_ref.partition("/")[0],
        "--startup-timeout",
        f"{options.startup_timeout:g}",
    ]
    argv += _turn_flags(turn, options)
    for image in turn.images:
        if image.path:
            argv += ["--file", image.media_type, image.path]
    if turn.ask_permissions:
        argv.append("--control")
    return tuple(argv)


def build_opencode_exec(turn: TurnRequest) -> RunnerExec:
    """The exec for one turn.

    Raises:
        RunnerError: an empty prompt, no connector or no model.
        ConfigError: bad `runner.options` (the key path named).
    """
    if not turn.prompt.strip():
        raise RunnerError("opencode", "the prompt is empty")
    options = OpencodeOptions.parse(turn.options)
    layout = Layout.of(turn)
    config = build_config(turn, options, layout)
    drive = drive_for(turn, options)
    env = build_env(turn, layout, options, config.secret_env)
    if drive == "run":
        argv, stdin = _run_argv(turn, options, config.model_ref)
    elif turn.ask_permissions:
        argv, stdin = _serve_argv(turn, options, layout, config.model_ref), control_prompt(turn.prompt)
    else:
        argv, stdin = _serve_argv(turn, options, layout, config.model_ref), turn.prompt.encode()
    return RunnerExec(
        argv=argv,
        env=env,
        stdin=stdin,
        keep_stdin_open=turn.ask_permissions,
        files=_files(turn, layout, config.text, drive),
        workdir=turn.workdir,
        secret_env=tuple(sorted(config.secret_env)),
    )
