"""A command group that imports a sub-command's module only when that sub-command runs.

`cage --help` and `cage validate` must not pay for FastAPI, SQLAlchemy, the model SDKs or MCP
(issue 14): each sub-command lives in its own module and is named here by import path, with its
one-line help kept next to the name so that the root help and shell completion of command names
need no import at all. A test checks that each line matches the command's own docstring.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """A sub-command known by name before its module is imported."""

    target: str
    """`module:attribute`, a `typer.Typer` or a command function."""
    help: str
    """The one-line help shown in `cage --help`: the first line of the command's docstring."""
    panel: str | None = None
    """The help panel the command is listed in (None: the default one)."""

    def load(self, name: str) -> Any:
        """Import the module and build the click command (a group for a `typer.Typer`).

        The import runs with the cyclic garbage collector off; then one full collection takes its
        garbage (pydantic's schema building leaves some 60 thousand objects in cycles) and what
        is left, the modules and models (some 120 thousand objects for `cage run`), is frozen out
        of the collector's sight. Otherwise the collector traverses them several times while they
        load and again at every later full collection (`cage run`: ~60 ms of CPU less).
        """
        module_name, _, attr = self.target.partition(":")
        collecting = gc.isenabled()
        gc.disable()
        try:
            module = importlib.import_module(module_name)
        finally:
            gc.collect()
            gc.freeze()
            if collecting:
                gc.enable()
        obj: typer.Typer | Callable[..., Any] = getattr(module, attr)
        if not isinstance(obj, typer.Typer):
            single = typer.Typer(add_completion=False)
            single.command(name)(obj)
            obj = single
        command = typer.main.get_command(obj)
        command.name = name
        if self.panel is not None:
            command.rich_help_panel = self.panel  # type: ignore[attr-defined]
        return command


class LazyGroup(TyperGroup):
    """A `TyperGroup` whose sub-commands come from `lazy_commands`, loaded on first use.

    While the group's own help or a completion of command names is produced, placeholders that
    carry only the name and the one-line help stand in for the commands.
    """

    lazy_commands: ClassVar[dict[str, LazyCommand]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._placeholders_only = False
        self._loaded: dict[str, Any] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *self.lazy_commands]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        lazy = self.lazy_commands.get(cmd_name)
        if found is not None or lazy is None:
            return found
        if self._placeholders_only and cmd_name not in self._loaded:
            placeholder = TyperCommand(cmd_name, help=lazy.help)
            placeholder.rich_help_panel = lazy.panel
            return placeholder
        if cmd_name not in self._loaded:
            self._loaded[cmd_name] = lazy.load(cmd_name)
        return self._loaded[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._placeholders_only = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._placeholders_only = False

    def shell_complete(self, ctx: Any, incomplete: str) -> Any:
        self._placeholders_only = True
        try:
            return super().shell_complete(ctx, incomplete)
        finally:
            self._placeholders_only = False
