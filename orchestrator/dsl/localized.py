"""An assistant as one request's locale sees it (Yao's per-request i18n of an assistant).

Its prompts, presets and global prompts have their message keys and `{{ key }}` templates
resolved from its `locales/<lang>.yml` tables, and its package's `name` and `description` are
the locale's (`orchestrator.dsl.locales.display_field`). A key the locale lacks comes from the
default locale, so an unknown locale reads as the default one.
"""

from __future__ import annotations

from orchestrator.dsl.assistant import Assistant
from orchestrator.dsl.locales import display_field, localize_prompts


def localized(assistant: Assistant, locale: str) -> Assistant:
    """`assistant` with its prompts and display fields resolved in `locale` (lower case)."""
    tables = assistant.messages
    package = assistant.package.model_copy(
        update={
            "name": display_field(tables, "name", assistant.package.name, locale),
            "description": display_field(tables, "description", assistant.package.description, locale),
        }
    )
    return assistant.model_copy(
        update={
            "package": package,
            "prompts": localize_prompts(assistant.prompts, tables, locale),
            "presets": {k: localize_prompts(v, tables, locale) for k, v in assistant.presets.items()},
            "global_prompts": localize_prompts(assistant.global_prompts, tables, locale),
        }
    )
