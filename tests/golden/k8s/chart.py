"""Render `deploy/helm/cage` without a `helm` binary: its templates are plain YAML whose only
template actions are `{{ .Values.a.b }}` and `{{ .Release.Name|Namespace }}` substitutions and
whole-line, unnested `{{- if .Values.a.b }}` ... `{{- end }}` blocks (kept when the value is true
as Go templates judge it: not empty, zero or false). This renderer refuses any other action, so
what it renders is what `helm template` renders (up to the whitespace `{{-` trims, which YAML
ignores)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[3] / "deploy" / "helm" / "cage"
_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
_REF = re.compile(r"\.(Values|Release)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_IF = re.compile(r"\s*\{\{-\s*if\s+\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*\}\}\s*")
_END = re.compile(r"\s*\{\{-\s*end\s*\}\}\s*")


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            _merge(out[key], value)
            if isinstance(value, Mapping) and isinstance(out.get(key), Mapping)
            else value
        )
    return out


def _lookup(root: Mapping[str, Any], path: str, where: str) -> Any:
    node: Any = root
    for part in path.strip(".").split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ValueError(f"{where}: no value {path!r}")
        node = node[part]
    if isinstance(node, (Mapping, list)):
        raise ValueError(f"{where}: {path!r} is not a scalar")
    return node


def _blocks(text: str, values: Mapping[str, Any], where: str) -> str:
    """`text` with its `if` blocks resolved: kept lines without the `if`/`end` lines."""
    out: list[str] = []
    keep: bool | None = None  # None: outside a block
    for line in text.splitlines(keepends=True):
        opened, closed = _IF.fullmatch(line), _END.fullmatch(line)
        if opened is not None:
            if keep is not None:
                raise ValueError(f"{where}: nested if blocks are not supported")
            keep = bool(_lookup(values, opened.group(1), where))
        elif closed is not None:
            if keep is None:
                raise ValueError(f"{where}: end without if")
            keep = None
        elif keep is not False:
            out.append(line)
    if keep is not None:
        raise ValueError(f"{where}: if without end")
    return "".join(out)


def chart_values(overrides: Mapping[str, Any] | None = None, *, chart: Path = CHART) -> dict[str, Any]:
    """values.yaml merged with `overrides`, as the templates see them."""
    return _merge(yaml.safe_load((chart / "values.yaml").read_text()) or {}, overrides or {})


def render(
    overrides: Mapping[str, Any] | None = None,
    *,
    name: str = "cage",
    namespace: str = "cage",
    chart: Path = CHART,
) -> list[dict[str, Any]]:
    """Every object of the chart, with values.yaml merged with `overrides`."""
    values = chart_values(overrides, chart=chart)
    release = {"Name": name, "Namespace": namespace}
    objects: list[dict[str, Any]] = []
    for template in sorted((chart / "templates").glob("*.yaml")):

        def substitute(match: re.Match[str], template: Path = template) -> str:
            ref = _REF.fullmatch(match.group(1))
            if ref is None:
                raise ValueError(f"{template.name}: unsupported template action {match.group(0)!r}")
            root = values if ref.group(1) == "Values" else release
            value = _lookup(root, ref.group(2), template.name)
            return str(value).lower() if isinstance(value, bool) else str(value)

        text = _ACTION.sub(substitute, _blocks(template.read_text(), values, template.name))
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects
