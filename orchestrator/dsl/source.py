"""`AssistantSource`: where one assistant's documents come from, a directory or memory.

The loader reads every assistant the same way from a source: `package.yao`, `sandbox.yao` and
`prompts.yml` as `Document`s (with the line of every key where the text has lines, so errors name
file, line and key), and, for a directory, the folders beside them (`prompts/`, `locales/`, `src/`,
`skills/`, `assets/`, `mcps/`). An assistant stored in the database has only the three documents,
held in memory: nothing is written to disk to load it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.dsl.document import Document
from orchestrator.dsl.jsonc import parse_jsonc
from orchestrator.dsl.yamldoc import parse_yaml
from orchestrator.errors import ConfigError

PACKAGE = "package.yao"
SANDBOX = "sandbox.yao"
PROMPTS = "prompts.yml"


def read_document(path: Path, rel: Path) -> Document:
    """Read and parse a `.yao` (JSONC) or `.yml`/`.yaml` file.

    Raises:
        ConfigError: unreadable file or syntax error.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError("file is not valid UTF-8", file=rel) from None
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", file=rel) from exc
    if path.suffix in (".yml", ".yaml"):
        return parse_yaml(text, file=rel)
    return parse_jsonc(text, file=rel)


def stored_label(assistant_id: str) -> Path:
    """How errors name a stored assistant's documents: `assistant <id>/package.yao`."""
    return Path(f"assistant {assistant_id}")


@dataclass(frozen=True)
class AssistantSource:
    """One assistant's documents: parsed already (`documents`), or read from `directory`."""

    directory: Path | None
    """The assistant directory (absolute); None for a stored assistant, which has no other files."""
    documents: Mapping[str, Document] = field(default_factory=dict)
    rel: Callable[[Path], Path] = lambda path: path
    """Maps a file to the path shown in errors."""

    @classmethod
    def of_directory(cls, directory: Path, rel: Callable[[Path], Path]) -> AssistantSource:
        return cls(directory=directory, rel=rel)

    @classmethod
    def of_values(
        cls,
        assistant_id: str,
        *,
        package: Mapping[str, Any],
        prompts: Any = None,
        sandbox: Mapping[str, Any] | None = None,
    ) -> AssistantSource:
        """A stored assistant: its `package.yao`, `prompts.yml` and `sandbox.yao` as JSON values (no
        lines: errors name the document and the key)."""
        label = stored_label(assistant_id)
        documents = {PACKAGE: Document(file=label / PACKAGE, value=dict(package))}
        if prompts:
            documents[PROMPTS] = Document(file=label / PROMPTS, value=prompts)
        if sandbox is not None:
            documents[SANDBOX] = Document(file=label / SANDBOX, value=dict(sandbox))
        return cls(directory=None, documents=documents)

    def document(self, name: str) -> Document | None:
        """The document `name` (`sandbox.yao`, `prompts.yml`), or None without one.

        Raises:
            ConfigError: the file does not read or parse.
        """
        found = self.documents.get(name)
        if found is not None or self.directory is None:
            return found
        path = self.directory / name
        return read_document(path, self.rel(path)) if path.is_file() else None

    def package(self) -> Document:
        """`package.yao`, which every assistant has.

        Raises:
            ConfigError: it is missing, or does not read or parse.
        """
        found = self.documents.get(PACKAGE)
        if found is not None:
            return found
        path = (self.directory or Path()) / PACKAGE
        return read_document(path, self.rel(path))

    def has(self, name: str) -> bool:
        """Whether the source holds `name`, without reading it."""
        if name in self.documents:
            return True
        return self.directory is not None and (self.directory / name).is_file()

    def folder(self, name: str) -> Path | None:
        """The directory's folder `name` (`locales`, `skills`, ...); None for a stored assistant."""
        return None if self.directory is None else self.directory / name
