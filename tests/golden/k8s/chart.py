"""Render `deploy/helm/cage` without a `helm` binary: its templates are plain YAML whose only
template actions are `{{ .Values.a.b }}` and `{{ .Release.Name|Namespace }}` substitutions, and
this renderer refuses any other action, so what it renders is what `helm template` renders."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[3] / "deploy" / "helm" / "cage"
_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
_REF = re.compile(r"\.(Values|Release)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


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


def render(
    overrides: Mapping[str, Any] | None = None,
    *,
    name: str = "cage",
    namespace: str = "cage",
    chart: Path = CHART,
) -> list[dict[str, Any]]:
    """Every object of the chart, with values.yaml merged with `overrides`."""
    values = _merge(yaml.safe_load((chart / "values.yaml").read_text()) or {}, overrides or {})
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

        text = _ACTION.sub(substitute, template.read_text())
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects
