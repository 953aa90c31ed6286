"""`AssistantRegistry`: the one place that answers "which assistant is `id`?", for the API's
catalog and for the pipeline alike.

Assistants come from three places: the app's `assistants/` directory and the system assistants
shipped in `builtin/` (both through the `AppLoader` and its LRU cache), and those created over the
API, stored in the database. A stored assistant loads from its documents in memory
(`AssistantSource.of_values`), through the same loader code as a directory (the same validation,
connectors, roles and defaults), and is cached by its version (a digest of its documents): an update
is read by the next turn, concurrent turns of one version share one load, and nothing is written to
disk.

An API-created document comes from a network client (an admin key), so its `$ENV.` references
resolve only against the environment variables the operator exposes with a prefix
(`CAGE_API_ASSISTANT_ENV_PREFIX`, none by default), never the orchestrator's own environment
(database URL, bootstrap key, provider keys).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Mapping

import anyio
from anyio import to_thread
from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.dsl import AppLoader, Assistant, is_system_id
from orchestrator.dsl.source import AssistantSource
from orchestrator.errors import ConfigError, NotFound
from orchestrator.store import AssistantRecord, Store

CACHE_SIZE = 256
"""Loaded stored assistants kept in memory (by version)."""


def version_of(record: AssistantRecord) -> str:
    """A digest of everything the stored assistant's documents are made of."""
    content = json.dumps([record.package, record.prompts, record.sandbox], sort_keys=True, default=str)
    return hashlib.sha256(content.encode()).hexdigest()[:20]


def exposed_environ(prefix: str | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables an API-created assistant's `$ENV.` may read: those starting with `prefix`."""
    if not prefix:
        return {}
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if k.startswith(prefix)}


class Sharing(BaseModel):
    """Who may use a stored assistant, read off its package (`public`); the loader checks the rest."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    public: bool = False
    """Anyone may call it; else only its owner."""

    @classmethod
    def of(cls, record: AssistantRecord) -> Sharing:
        """`record`'s; a package that does not validate shares nothing."""
        try:
            return cls.model_validate(record.package)
        except ValidationError:
            return cls()


def _not_found(assistant_id: str) -> NotFound:
    return NotFound(f"assistant {assistant_id!r} not found")


class AssistantRegistry:
    """Files, system and stored assistants behind one lookup. One per process, on one event loop."""

    def __init__(
        self, loader: AppLoader, store: Store, *, env_prefix: str | None = None, cache_size: int = CACHE_SIZE
    ) -> None:
        self.loader = loader
        self._store = store
        self._environ = exposed_environ(env_prefix)
        self._cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], Assistant] = OrderedDict()
        self._loading: dict[tuple[str, str], anyio.Lock] = {}

    async def file_ids(self) -> list[str]:
        """The ids of the app's and the system assistants (the directories rescanned)."""
        return await to_thread.run_sync(self.loader.ids)

    async def known_ids(self) -> set[str]:
        """Every assistant id, on disk and in the database (all of them, however many)."""
        return {*await self.file_ids(), *await self._store.assistants.all_ids()}

    async def record(self, assistant_id: str) -> AssistantRecord | None:
        """The stored (API-created) assistant `assistant_id`, if there is one."""
        return await self._store.assistants.get(assistant_id)

    async def exists(self, assistant_id: str) -> bool:
        """Known on disk (rescanned: a directory added since the last scan counts) or in the database."""
        if assistant_id in await self.file_ids() or await self.record(assistant_id):
            return True
        try:
            await to_thread.run_sync(self.loader.get, assistant_id)
        except NotFound:
            return False
        except ConfigError:
            return True  # it exists; starting a turn reports what is wrong with it
        return True

    async def get(self, assistant_id: str) -> Assistant:
        """The assistant `assistant_id`, from its files or from the database, whoever owns it.

        Raises:
            NotFound: no such assistant. ConfigError: its files or documents do not load.
        """
        try:
            return await to_thread.run_sync(self.loader.get, assistant_id)
        except NotFound:
            record = await self.record(assistant_id)
            if record is None:
                raise
        return await self.load_stored(record)

    async def authorize(self, owner: str, assistant_id: str) -> Assistant:
        """The assistant, if `owner` may use it: system and public ones anyone may call; a stored
        one is its owner's (or anyone's when its package is public).

        Raises:
            NotFound: no such assistant, or another owner's private one. ConfigError: broken files.
        """
        try:
            assistant = self.loader.cached(assistant_id)  # no thread hop for a loaded assistant
            if assistant is None:
                assistant = await to_thread.run_sync(self.loader.get, assistant_id)
        except NotFound:
            record = await self.record(assistant_id)
            if record is None or (record.owner != owner and not Sharing.of(record).public):
                raise _not_found(assistant_id) from None
            return await self.load_stored(record)
        if is_system_id(assistant_id) or assistant.package.public:
            return assistant
        record = await self.record(assistant_id)
        if record is not None and record.owner != owner:
            raise _not_found(assistant_id)
        return assistant

    async def load_stored(self, record: AssistantRecord) -> Assistant:
        """The stored assistant as a loaded `Assistant`, one load per version.

        Raises:
            ConfigError: the stored content does not validate (the API checks it on write, so this
                means an agent.yml or connector change made it invalid since).
        """
        key = (record.id, version_of(record))
        loading = self._loading.setdefault(key, anyio.Lock())
        async with loading:  # one load per version: concurrent turns wait for the first
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
            source = AssistantSource.of_values(
                record.id, package=record.package, prompts=record.prompts, sandbox=record.sandbox
            )
            try:
                assistant = await to_thread.run_sync(
                    lambda: self.loader.load_source(source, record.id, environ=self._environ)
                )
            finally:
                self._loading.pop(key, None)
            self._cache[key] = assistant
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return assistant

    def cached_versions(self, assistant_id: str) -> list[str]:
        """The versions of a stored assistant held loaded, oldest first."""
        return [version for (found, version), _ in self._cache.items() if found == assistant_id]
