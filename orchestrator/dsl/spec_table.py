"""`SpecTable`: every definition of one kind an app has (its connectors, its MCP servers): the ones
that loaded, and the stored error of each one that did not, so a broken definition fails the turns
that use it, not the app."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar

from orchestrator.errors import ConfigError, NotFound

Spec = TypeVar("Spec")


@dataclass
class SpecTable(Generic[Spec]):
    """Definitions by id: loaded (`specs`) or failed (`errors`), never both."""

    what: ClassVar[str] = "definition"
    """What one entry is, for the `NotFound` message (`connector`, `MCP server`)."""
    specs: dict[str, Spec] = field(default_factory=dict)
    errors: dict[str, ConfigError] = field(default_factory=dict)

    def __contains__(self, spec_id: object) -> bool:
        return spec_id in self.specs or spec_id in self.errors

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*self.specs, *self.errors}))

    def get(self, spec_id: str) -> Spec:
        """The definition `spec_id`.

        Raises:
            ConfigError: it is defined but failed to load (e.g. its `$ENV` key is unset).
            NotFound: nothing has this id.
        """
        if spec_id in self.specs:
            return self.specs[spec_id]
        if spec_id in self.errors:
            raise self.errors[spec_id]
        raise NotFound(f"{self.what} {spec_id!r} is not defined")

    def load(self, spec_id: str, build: Callable[[], Spec]) -> None:
        """Replace `spec_id` with what `build` makes; its `ConfigError` is stored, not raised."""
        self.specs.pop(spec_id, None)
        self.errors.pop(spec_id, None)
        try:
            self.specs[spec_id] = build()
        except ConfigError as exc:
            self.errors[spec_id] = exc

    def fail(self, spec_id: str, error: ConfigError) -> None:
        """Store `error` against `spec_id` (in place of whatever it held)."""
        self.specs.pop(spec_id, None)
        self.errors[spec_id] = error
