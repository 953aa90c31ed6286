"""Image hash and config hash: the two digests that decide image reuse and sandbox reuse.

* `image_hash` covers what goes into a runner image: the Dockerfile and every build-context file,
  the base image **id** (a re-tagged or rebuilt base changes it, a second tag of the same base does
  not), and the build args. The tag is `cage/<runner>:<first 12 hex>`.
* `config_hash` covers what goes into a sandbox: the canonical JSON of `sandbox.yao`, the image hash,
  the MCP servers and the skills. Secret values enter only as their own sha256 digest, so a changed
  secret changes the hash while the value itself never appears in the hashed text.

Both are pure: no engine, no clock, no randomness; `image_hash` only reads the context files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.dsl import McpServerSpec
from orchestrator.dsl.sandbox import SandboxSpec

TAG_HASH_LEN = 12
"""Hex digits of the image hash used in the tag `cage/<runner>:<hash12>`."""

_SECRET_PREFIX = "sha256:"


def sha256_hex(data: bytes | str) -> str:
    """The sha256 of `data` (UTF-8 for text) as 64 lowercase hex digits."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give byte-equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def context_files(directory: Path) -> dict[str, bytes]:
    """Every regular file under `directory`, keyed by its POSIX path relative to it."""
    files: dict[str, bytes] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            files[path.relative_to(directory).as_posix()] = path.read_bytes()
    return files


def image_hash(
    dockerfile_dir: Path,
    *,
    base_image_id: str,
    build_args: Mapping[str, str],
    extra_files: Mapping[str, bytes] | None = None,
) -> str:
    """sha256 over the Dockerfile, the context files, the base image id and the build args.

    `extra_files` are files the builder adds to the context (an extra CA bundle, the project
    source); they override a file of the same relative path in `dockerfile_dir`.
    """
    files = context_files(dockerfile_dir)
    files.update(extra_files or {})
    return sha256_hex(
        canonical_json(
            {
                "kind": "cage.image/v1",
                "base_image_id": base_image_id,
                "build_args": dict(build_args),
                "files": {name: sha256_hex(content) for name, content in sorted(files.items())},
            }
        )
    )


def image_tag(runner: str, digest: str) -> str:
    """`cage/<runner>:<first 12 hex of the image hash>`."""
    return f"cage/{runner}:{digest[:TAG_HASH_LEN]}"


def secret_digest(value: str) -> str:
    """What stands for a secret value in hashed text: `sha256:<hex>`."""
    return _SECRET_PREFIX + sha256_hex(value)


def _spec_document(spec: SandboxSpec) -> dict[str, Any]:
    """The spec as JSON data with every secret-bearing value replaced by its digest.

    Defaults are left out so that a field added to `SandboxSpec` later does not change the hash
    of every existing sandbox. Environment values are digested too: after `$ENV.` expansion they
    often hold API keys.
    """
    doc: dict[str, Any] = spec.model_dump(mode="json", exclude_defaults=True, exclude={"pool"})
    for entry in doc.get("secrets", {}).values():
        if "value" in entry:
            entry["value"] = secret_digest(entry["value"])
    vnc = doc.get("computer", {}).get("vnc", {})
    if "password" in vnc:
        vnc["password"] = secret_digest(vnc["password"])
    if "environment" in doc:
        doc["environment"] = {name: secret_digest(value) for name, value in doc["environment"].items()}
    return doc


def mcp_document(server: McpServerSpec) -> dict[str, Any]:
    """What of an MCP server feeds the config hash: all but its `env` and `headers` (its tokens,
    which may change without making a new box)."""
    document: dict[str, Any] = server.model_dump(mode="json", exclude={"env", "headers"})
    return document


def canonical_config(
    spec: SandboxSpec,
    *,
    image_hash: str,
    mcp_servers: Sequence[Mapping[str, Any]] = (),
    skills: Mapping[str, str] | None = None,
) -> str:
    """The exact text `config_hash` digests. Safe to log: it holds no secret value.

    MCP server configs (which carry tokens in `env` and `headers`) enter as the digest of their
    canonical JSON, sorted so that listing order does not matter. `skills` maps a skill name to
    the digest of its content.
    """
    return canonical_json(
        {
            "kind": "cage.config/v1",
            "spec": _spec_document(spec),
            "image_hash": image_hash,
            "mcp_servers": sorted(sha256_hex(canonical_json(dict(server))) for server in mcp_servers),
            "skills": dict(skills or {}),
        }
    )


def config_hash(
    spec: SandboxSpec,
    *,
    image_hash: str,
    mcp_servers: Sequence[Mapping[str, Any]] = (),
    skills: Mapping[str, str] | None = None,
) -> str:
    """sha256 (64 lowercase hex) of `canonical_config`; stored as the `cage.config-hash` label."""
    return sha256_hex(canonical_config(spec, image_hash=image_hash, mcp_servers=mcp_servers, skills=skills))
