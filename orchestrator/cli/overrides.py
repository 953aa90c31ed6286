"""`cage run --set sandbox.key=value` and `--env K=V`: command-line overrides of an assistant's sandbox.yao.

Values are read as YAML scalars (`--set sandbox.computer.cpus=2` is a number, `...=true` a bool),
applied to the spec's JSON form and validated again, so a bad override fails with the same messages
as a bad file, naming the `--set` option at fault.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from orchestrator.dsl import SandboxSpec
from orchestrator.errors import ConfigError, UsageError

_PREFIX = "sandbox."
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _parse_set(item: str) -> tuple[list[str], Any]:
    key, sep, raw = item.partition("=")
    if not sep or not key.startswith(_PREFIX) or len(key) == len(_PREFIX):
        raise UsageError(
            f"--set {item!r}: expected sandbox.<key.path>=<value>, e.g. sandbox.lifecycle=session"
        )
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError as exc:
        raise UsageError(f"--set {item!r}: value is not a YAML scalar: {exc}") from exc
    return key[len(_PREFIX) :].split("."), value


def apply_sets(spec: SandboxSpec, items: Sequence[str], *, file: Path) -> SandboxSpec:
    """`spec` with every `--set` applied.

    Raises:
        UsageError: an item is not `sandbox.<path>=<value>`.
        ConfigError: the result is not a valid sandbox.yao (names the option and the key path).
    """
    if not items:
        return spec
    data: dict[str, Any] = spec.model_dump(mode="json", exclude_defaults=True)
    data["version"] = spec.version
    data.setdefault("runner", {})["name"] = spec.runner.name
    for item in items:
        path, value = _parse_set(item)
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[path[-1]] = value
    try:
        return SandboxSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"{err['msg']} (from --set)", file=file, key_path=where) from exc


def apply_env(spec: SandboxSpec, items: Sequence[str]) -> SandboxSpec:
    """`spec` with `--env K=V` items added to its `environment`.

    Raises:
        UsageError: an item is not `NAME=value` with a valid variable name.
    """
    if not items:
        return spec
    env = dict(spec.environment)
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not _ENV_NAME.fullmatch(name):
            raise UsageError(f"--env {item.partition('=')[0]!r}: expected NAME=value")
        env[name] = value
    return spec.model_copy(update={"environment": env})
