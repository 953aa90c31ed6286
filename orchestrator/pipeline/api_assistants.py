"""Assistants created over the API run like file assistants: their stored record is written out as
an assistant directory (`package.yao`, `prompts.yml`, `sandbox.yao`) and loaded by the app's loader,
so they get the same validation, connectors, roles and defaults."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from orchestrator.dsl import AppLoader, Assistant
from orchestrator.errors import NotFound
from orchestrator.store import AssistantRecord

_SAFE_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def materialize(record: AssistantRecord, root: Path) -> Path:
    """Write the record's files under `root/<id>/`, replacing what an earlier version left."""
    if not _SAFE_ID.fullmatch(record.id) or record.id in (".", ".."):
        raise NotFound(f"assistant {record.id!r} not found")
    directory = root / record.id
    staging = root / f".{record.id}.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / "package.yao").write_text(json.dumps(record.package, indent=2), encoding="utf-8")
    if record.prompts:
        (staging / "prompts.yml").write_text(
            yaml.safe_dump(record.prompts, sort_keys=False), encoding="utf-8"
        )
    if record.sandbox is not None:
        (staging / "sandbox.yao").write_text(json.dumps(record.sandbox, indent=2), encoding="utf-8")
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)
    return directory


def load_api_assistant(record: AssistantRecord, root: Path, loader: AppLoader) -> Assistant:
    """The stored assistant as a loaded `Assistant` (blocking: call it from a worker thread).

    Raises:
        ConfigError: the stored content does not validate (the API checks it on write, so this means
            an agent.yml or connector change made it invalid since).
    """
    return loader.load_directory(materialize(record, root), record.id)
