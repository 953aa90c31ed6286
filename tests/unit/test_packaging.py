"""The install is reproducible: requirements.lock pins (with hashes) every requirement of
pyproject.toml at a version the requirement allows, and the runner image contexts are package data."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", re.MULTILINE)


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requirements() -> list[Requirement]:
    project = _pyproject()["project"]
    return [Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["dev"]]]


def _pins() -> dict[str, str]:
    return {canonicalize_name(n): v for n, v in PIN.findall((ROOT / "requirements.lock").read_text())}


@pytest.mark.parametrize("requirement", _requirements(), ids=str)
def test_every_requirement_is_pinned_within_its_range(requirement: Requirement) -> None:
    pins = _pins()
    name = canonicalize_name(requirement.name)
    assert name in pins, f"{requirement} is not in requirements.lock: run `make lock`"
    assert requirement.specifier.contains(pins[name], prereleases=True), (
        f"requirements.lock pins {name}=={pins[name]}, outside {requirement}: run `make lock`"
    )


def test_every_pin_carries_hashes() -> None:
    text = (ROOT / "requirements.lock").read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert blocks and all("--hash=sha256:" in block for block in blocks if PIN.match(block))


def test_the_runner_image_contexts_are_package_data() -> None:
    package_data = _pyproject()["tool"]["setuptools"]["package-data"]
    assert "images/**/*" in package_data["orchestrator"]
    images = ROOT / "orchestrator" / "images"
    for runner in ("claude", "codex", "opencode", "tools", "tai", "egress"):
        assert (images / runner / "Dockerfile").is_file(), runner
    assert (images / "common" / "cage-ca.sh").is_file()


def test_the_runtime_lock_is_the_dev_lock_without_the_dev_tools() -> None:
    """`requirements-runtime.lock` (the orchestrator image) pins the same versions, and every
    runtime requirement, with hashes."""
    runtime = {
        canonicalize_name(n): v for n, v in PIN.findall((ROOT / "requirements-runtime.lock").read_text())
    }
    pins = _pins()
    assert runtime and all(pins.get(name) == version for name, version in runtime.items())
    for requirement in (Requirement(r) for r in _pyproject()["project"]["dependencies"]):
        assert canonicalize_name(requirement.name) in runtime, f"{requirement}: run `make lock`"
    assert "pytest" not in runtime and "mypy" not in runtime
    assert "--hash=sha256:" in (ROOT / "requirements-runtime.lock").read_text()
