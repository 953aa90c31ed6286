"""Offline validation of Kubernetes objects against the OpenAPI-derived JSON schemas that the
`kubernetes-validate` package bundles (strict: an unknown field is an error)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
import kubernetes_validate

KUBERNETES_VERSION = "1.30.0"
"""The oldest Kubernetes the backend and the chart target (every field used exists there)."""


def schema_errors(manifest: Mapping[str, Any]) -> str | None:
    """None when `manifest` is a valid object of its kind, else where and why it is not."""
    kind = manifest.get("kind")
    name = (manifest.get("metadata") or {}).get("name")
    try:
        kubernetes_validate.validate(dict(manifest), KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return f"{kind} {name}: no schema for {manifest.get('apiVersion')} {kind}"
    except kubernetes_validate.ValidationError as exc:
        cause = exc.__context__
        if isinstance(cause, jsonschema.ValidationError):
            path = "/".join(str(p) for p in cause.absolute_path)
            return f"{kind} {name}: {path}: {cause.message}"
        return f"{kind} {name}: invalid"
    return None
