"""JSON Schemas of `sandbox.yao` and `package.yao`, generated from the models.

Attribute docstrings become `description`s, so the published schema cannot drift from the code.
`cage schemas --write schemas/` (`make schemas`) writes them; a test fails when they are stale.
"""

from __future__ import annotations

from typing import Any

from orchestrator.dsl.package import PackageSpec
from orchestrator.dsl.sandbox import SandboxSpec


def sandbox_schema() -> dict[str, Any]:
    """JSON Schema of `sandbox.yao` (version "2.0")."""
    schema = SandboxSpec.model_json_schema(mode="validation")
    schema["title"] = "sandbox.yao (Sandbox V2)"
    return schema


def package_schema() -> dict[str, Any]:
    """JSON Schema of an assistant's `package.yao`."""
    schema = PackageSpec.model_json_schema(mode="validation")
    schema["title"] = "package.yao"
    return schema
