"""The API's view of every assistant the server knows (`AssistantRegistry`: files under
`assistants/`, shipped system ones, and API-created ones stored in the database), and the writes:
only API-created assistants can be changed over the API."""

from __future__ import annotations

from typing import Any, Literal

from anyio import to_thread
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from orchestrator.api.auth import Principal
from orchestrator.api.policy import ApiAssistantPolicy
from orchestrator.assistants import AssistantRegistry
from orchestrator.dsl import AppLoader, Assistant, PackageSpec, Prompt, SandboxSpec, is_system_id
from orchestrator.dsl.locales import DEFAULT_LOCALE, display_field
from orchestrator.errors import ConfigError, ConfigErrors, Conflict, Forbidden, NotFound
from orchestrator.store import AssistantRecord, Store

_FROZEN = ConfigDict(frozen=True, extra="forbid")
ASSISTANT_ID = r"^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*$"
Source = Literal["system", "file", "api"]


class AssistantSummary(BaseModel):
    model_config = _FROZEN
    id: str
    name: str
    source: Source
    """`system` and `file` assistants are read-only over the API; `api` ones were created over it."""
    readonly: bool
    mode: str
    """`runner`, `llm` or `hook`; `invalid` when its files do not load."""
    runner: str | None = None
    description: str = ""
    error: str | None = None
    """Why a file assistant does not load."""


class AssistantDetail(AssistantSummary):
    package: dict[str, JsonValue] = Field(default_factory=dict)
    prompts: JsonValue = None
    sandbox: dict[str, JsonValue] | None = None


class AssistantBody(BaseModel):
    """An API-created assistant: `package.yao`, `prompts.yml` and `sandbox.yao` as JSON."""

    model_config = _FROZEN
    package: dict[str, JsonValue]
    prompts: list[dict[str, JsonValue]] = Field(default_factory=list)
    sandbox: dict[str, JsonValue] | None = None


class NewAssistant(AssistantBody):
    id: str = Field(min_length=1, max_length=128, pattern=ASSISTANT_ID)


def _check(assistant_id: str, body: AssistantBody, policy: ApiAssistantPolicy) -> None:
    """Raises: ConfigError naming every bad `package.<key>`, `prompts.<i>.<key>` and `sandbox.<key>`,
    and every `sandbox.computer.<key>` past the server's policy for API-created assistants."""
    problems: list[ConfigError] = []
    checks: list[tuple[tuple[str | int, ...], type[BaseModel], object]] = [
        (("package",), PackageSpec, body.package),
        *((("prompts", i), Prompt, p) for i, p in enumerate(body.prompts)),
    ]
    if body.sandbox is not None:
        checks.append((("sandbox",), SandboxSpec, body.sandbox))
    for where, model, data in checks:
        try:
            model.model_validate(data)
        except ValidationError as exc:
            problems += [
                ConfigError(
                    str(e["msg"]),
                    file=f"assistant {assistant_id}",
                    key_path=".".join(map(str, (*where, *e["loc"]))),
                )
                for e in exc.errors()
            ]
    if not problems and body.sandbox is not None:
        problems += policy.problems(assistant_id, SandboxSpec.model_validate(body.sandbox))
    if problems:
        raise ConfigErrors(problems)


def _file_summary(loader: AppLoader, assistant_id: str, locale: str = DEFAULT_LOCALE) -> AssistantDetail:
    """Blocking (reads files): run in a worker thread. `name` and `description` are in `locale`
    (the assistant's `locales/<lang>.yml`, falling back to the default locale)."""
    readonly = loader.is_readonly(assistant_id)
    source: Source = "system" if is_system_id(assistant_id) or readonly else "file"
    try:
        a: Assistant = loader.get(assistant_id)
    except ConfigError as exc:
        return AssistantDetail(
            id=assistant_id, name=assistant_id, source=source, readonly=True, mode="invalid", error=str(exc)
        )
    package: dict[str, Any] = a.package.model_dump(mode="json", exclude_defaults=True)
    sandbox = a.sandbox.model_dump(mode="json", exclude_defaults=True) if a.sandbox else None
    return AssistantDetail(
        id=a.id,
        name=display_field(a.messages, "name", a.name, locale),
        source=source,
        readonly=True,
        mode=a.mode.value,
        runner=a.sandbox.runner.name if a.sandbox else None,
        description=display_field(a.messages, "description", a.package.description, locale),
        package=package,
        prompts=[p.model_dump(mode="json") for p in a.prompts],
        sandbox=sandbox,
    )


def _api_detail(record: AssistantRecord) -> AssistantDetail:
    runner = record.sandbox.get("runner") if record.sandbox else None
    runner_name = runner.get("name") if isinstance(runner, dict) else None
    mode = "runner" if record.sandbox else "llm" if record.prompts else "hook"
    description = record.package.get("description")
    return AssistantDetail(
        id=record.id,
        name=str(record.package.get("name", record.id)),
        source="api",
        readonly=False,
        mode=mode,
        runner=str(runner_name) if runner_name else None,
        description=description if isinstance(description, str) else "",
        package=record.package,
        prompts=record.prompts,
        sandbox=record.sandbox,
    )


class Catalog:
    def __init__(
        self, assistants: AssistantRegistry, store: Store, policy: ApiAssistantPolicy | None = None
    ) -> None:
        self._assistants = assistants
        self._loader = assistants.loader
        self._store = store
        self._policy = policy or ApiAssistantPolicy()

    async def file_ids(self) -> list[str]:
        return await self._assistants.file_ids()

    async def known_ids(self) -> set[str]:
        """Every assistant id, on disk and in the database (all of them, however many)."""
        return await self._assistants.known_ids()

    async def exists(self, assistant_id: str) -> bool:
        """Known on disk (rescanned: a directory added since the last scan counts) or in the database."""
        return await self._assistants.exists(assistant_id)

    async def summaries(self, locale: str = DEFAULT_LOCALE) -> list[AssistantSummary]:
        details = [await self.get(i, locale) for i in await self.file_ids()]
        details += [_api_detail(r) for r in await self._store.assistants.list(limit=1000)]
        return [
            AssistantSummary.model_validate(d.model_dump(include=set(AssistantSummary.model_fields)))
            for d in sorted(details, key=lambda d: d.id)
        ]

    async def get(self, assistant_id: str, locale: str = DEFAULT_LOCALE) -> AssistantDetail:
        """Raises: NotFound."""
        if assistant_id in await self.file_ids():
            return await to_thread.run_sync(_file_summary, self._loader, assistant_id, locale)
        record = await self._assistants.record(assistant_id)
        if record is None:
            raise NotFound(f"assistant {assistant_id!r} not found")
        return _api_detail(record)

    async def _writable(self, assistant_id: str) -> None:
        if is_system_id(assistant_id) or await to_thread.run_sync(self._loader.is_readonly, assistant_id):
            raise Forbidden(f"assistant {assistant_id!r} is a system assistant and read-only")
        if assistant_id in await self.file_ids():
            raise Conflict(
                f"assistant {assistant_id!r} is defined by files under assistants/ and read-only over "
                "the API; edit its files, then POST /v1/admin/assistants/reload"
            )

    async def create(self, body: NewAssistant, actor: Principal) -> AssistantDetail:
        """Raises: Forbidden (system id), Conflict (file assistant or taken id), ConfigError (bad body)."""
        await self._writable(body.id)
        _check(body.id, body, self._policy)
        record = await self._store.assistants.create(
            body.id, owner=actor.owner, package=body.package, prompts=list(body.prompts), sandbox=body.sandbox
        )
        await self._store.audit.record(actor.key_id, "assistant.create", body.id)
        return _api_detail(record)

    async def update(self, assistant_id: str, body: AssistantBody, actor: Principal) -> AssistantDetail:
        """Raises: Forbidden, Conflict, NotFound, ConfigError."""
        await self._writable(assistant_id)
        _check(assistant_id, body, self._policy)
        record = await self._store.assistants.replace(
            assistant_id, package=body.package, prompts=list(body.prompts), sandbox=body.sandbox
        )
        await self._store.audit.record(actor.key_id, "assistant.update", assistant_id)
        return _api_detail(record)

    async def delete(self, assistant_id: str, actor: Principal) -> None:
        """Raises: Forbidden, Conflict, NotFound."""
        await self._writable(assistant_id)
        if not await self._store.assistants.delete(assistant_id):
            raise NotFound(f"assistant {assistant_id!r} not found")
        await self._store.audit.record(actor.key_id, "assistant.delete", assistant_id)

    async def reload(self, assistant_id: str | None, actor: Principal) -> list[str]:
        """Forget cached files (one assistant, or all with `agent.yml` and connectors); the ids found."""
        await to_thread.run_sync(self._loader.reload, assistant_id)
        await self._store.audit.record(actor.key_id, "assistant.reload", assistant_id or "*")
        return await self.file_ids()
