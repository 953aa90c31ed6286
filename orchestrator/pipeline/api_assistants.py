"""Assistants created over the API run like file assistants: their stored record is written out as
an assistant directory (`package.yao`, `prompts.yml`, `sandbox.yao`) and loaded by the app's loader,
so they get the same validation, connectors, roles and defaults.

Each version is written once, to its own directory (`<root>/<id>/<digest of the record>`), through
a unique staging directory renamed into place, and the loaded `Assistant` is kept in memory by that
version: concurrent turns of one assistant neither rewrite nor race on its files (a new version
gets a new directory; a turn holding the old one keeps it).

An API-created document comes from a network client (an admin key), so its `$ENV.` references
resolve only against the environment variables the operator exposes with a prefix
(`CAGE_API_ASSISTANT_ENV_PREFIX`, none by default), never the orchestrator's own environment
(database URL, bootstrap key, provider keys).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

import yaml

from orchestrator.dsl import AppLoader, Assistant
from orchestrator.errors import NotFound
from orchestrator.store import AssistantRecord

_SAFE_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")
CACHE_SIZE = 256
"""Loaded API assistants kept in memory (by version)."""


def version_of(record: AssistantRecord) -> str:
    """A digest of everything the record's files are made of."""
    content = json.dumps([record.package, record.prompts, record.sandbox], sort_keys=True, default=str)
    return hashlib.sha256(content.encode()).hexdigest()[:20]


def exposed_environ(prefix: str | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables an API-created assistant's `$ENV.` may read: those starting with `prefix`."""
    if not prefix:
        return {}
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if k.startswith(prefix)}


def materialize(record: AssistantRecord, root: Path) -> Path:
    """The directory of the record's current version under `root/<id>/`, written if missing."""
    if not _SAFE_ID.fullmatch(record.id) or record.id in (".", ".."):
        raise NotFound(f"assistant {record.id!r} not found")
    directory = root / record.id / version_of(record)
    if directory.is_dir():
        return directory
    staging = root / record.id / f".staging-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    try:
        (staging / "package.yao").write_text(json.dumps(record.package, indent=2), encoding="utf-8")
        if record.prompts:
            (staging / "prompts.yml").write_text(
                yaml.safe_dump(record.prompts, sort_keys=False), encoding="utf-8"
            )
        if record.sandbox is not None:
            (staging / "sandbox.yao").write_text(json.dumps(record.sandbox, indent=2), encoding="utf-8")
        try:
            staging.rename(directory)
        except OSError:
            if not directory.is_dir():  # not a racer that got there first: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory


class ApiAssistants:
    """Loads API-created assistants, one load per version, safe under concurrent turns."""

    def __init__(self, root: Path, *, env_prefix: str | None = None) -> None:
        self.root = root
        self._environ = exposed_environ(env_prefix)
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], Assistant] = OrderedDict()
        self._loading: dict[tuple[str, str], threading.Lock] = {}

    def load(self, record: AssistantRecord, loader: AppLoader) -> Assistant:
        """The stored assistant as a loaded `Assistant` (blocking: call it from a worker thread).

        Raises:
            ConfigError: the stored content does not validate (the API checks it on write, so this
                means an agent.yml or connector change made it invalid since).
        """
        key = (record.id, version_of(record))
        with self._lock:
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:  # one load per version: concurrent turns wait for the first
            with self._lock:
                found = self._cache.get(key)
                if found is not None:
                    self._cache.move_to_end(key)
                    return found
            directory = materialize(record, self.root)
            assistant = loader.load_directory(directory, record.id, environ=self._environ)
            with self._lock:
                self._cache[key] = assistant
                self._loading.pop(key, None)
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
            return assistant


def load_api_assistant(record: AssistantRecord, root: Path, loader: AppLoader) -> Assistant:
    """One-off load (no cache), with no environment exposed."""
    return loader.load_directory(materialize(record, root), record.id, environ={})
