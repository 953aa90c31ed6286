"""`cage completion SHELL`: the completion script, to source from the shell's start-up file."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion(shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")]) -> None:
    """Print the shell completion script for bash, zsh or fish.

    bash: `eval "$(cage completion bash)"` in ~/.bashrc; zsh: the same in ~/.zshrc;
    fish: `cage completion fish > ~/.config/fish/completions/cage.fish`.
    """
    from typer._completion_shared import get_completion_script  # typer's own; no public alias

    typer.echo(get_completion_script(prog_name="cage", complete_var="_CAGE_COMPLETE", shell=shell.value))
