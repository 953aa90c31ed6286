"""YAML files of an application (`agent.yml`, `prompts.yml`, `locales/*.yml`) as `Document`s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from orchestrator.dsl.document import Document, KeyPath
from orchestrator.errors import ConfigError


def parse_yaml(text: str, *, file: Path | str) -> Document:
    """Parse YAML text (safe loader) into a `Document` with the line of every key and element.

    An empty file is `None`.

    Raises:
        ConfigError: on a syntax error, with the line and column.
    """
    path = Path(file)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        value = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "syntax error"
        if mark is None:
            raise ConfigError(f"invalid YAML: {problem}", file=path) from exc
        raise ConfigError(
            f"invalid YAML: {problem} (column {mark.column + 1})", file=path, line=mark.line + 1
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=path) from exc
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _index(node, (), lines)
    return Document(file=path, value=value, lines=lines)


def _index(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = _key(key_node)
            if key is None:
                continue
            lines[(*path, key)] = key_node.start_mark.line + 1
            _index(value_node, (*path, key), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*path, i)] = item.start_mark.line + 1
            _index(item, (*path, i), lines)


def _key(node: yaml.Node) -> str | None:
    if not isinstance(node, yaml.ScalarNode):
        return None
    value: Any = node.value
    return str(value)
