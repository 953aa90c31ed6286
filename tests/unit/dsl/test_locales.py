"""Per-request locales: which locale a request asks for, and an assistant's name, description and
prompts resolved in it from its `locales/<lang>.yml`, an unknown locale reading as the default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.dsl import AppLoader
from orchestrator.dsl.locales import DEFAULT_LOCALE, display_field, localize_prompts, request_locale
from orchestrator.dsl.localized import localized
from orchestrator.dsl.package import Prompt


@pytest.mark.parametrize(
    ("explicit", "header", "expected"),
    [
        ("zh-CN", "en-US", "zh-cn"),  # the request's field wins over the header
        ("zh_CN", None, "zh-cn"),
        (None, "zh-CN,zh;q=0.9,en;q=0.8", "zh-cn"),
        (None, "en;q=0.5, fr-FR;q=0.9", "fr-fr"),  # the heaviest tag, not the first
        (None, "*, de", "de"),  # `*` says nothing
        (None, "x;q=oops, ja", "ja"),  # a bad weight drops its tag only
        (None, "en;q=0", DEFAULT_LOCALE),  # q=0 means "not this one"
        (None, "", DEFAULT_LOCALE),
        (None, None, DEFAULT_LOCALE),
        ("../../etc", None, DEFAULT_LOCALE),  # not a language tag: ignored
    ],
)
def test_the_locale_a_request_asks_for(explicit: str | None, header: str | None, expected: str) -> None:
    assert request_locale(explicit, header) == expected


TABLES = {
    "en-us": {"name": "{{ title }}", "title": "Helper", "greet": "Be helpful."},
    "zh-cn": {"name": "助手", "greet": "请帮忙。"},
    "zh": {"name": "助手", "greet": "请帮忙。"},
}


def test_display_fields_and_prompts_in_a_locale_fall_back_to_the_default() -> None:
    assert display_field(TABLES, "name", "{{ title }}", "zh-cn") == "助手"
    assert display_field(TABLES, "name", "{{ title }}", "zh-tw") == "助手"  # its short code
    assert display_field(TABLES, "name", "{{ title }}", "en-us") == "Helper"
    assert display_field(TABLES, "name", "{{ title }}", "fr-fr") == "Helper"  # unknown: the default
    assert display_field(TABLES, "description", "plain", "zh-cn") == "plain"  # no message: as written
    prompts = (Prompt(role="system", content="{{ greet }} {{ nope }}"), Prompt(role="user", content="title"))
    zh, fr = localize_prompts(prompts, TABLES, "zh-cn"), localize_prompts(prompts, TABLES, "fr")
    assert [p.content for p in zh] == ["请帮忙。 {{ nope }}", "Helper"]  # a key missing in zh-cn: en-us's
    assert [p.content for p in fr] == ["Be helpful. {{ nope }}", "Helper"]


def test_a_loaded_assistant_seen_in_a_locale(tmp_path: Path) -> None:
    directory = tmp_path / "assistants" / "helper"
    (directory / "locales").mkdir(parents=True)
    (directory / "package.yao").write_text(json.dumps({"name": "{{ title }}", "description": "Answers"}))
    (directory / "prompts.yml").write_text("- role: system\n  content: '{{ greet }}'\n")
    (directory / "prompts").mkdir()
    (directory / "prompts" / "short.yml").write_text("- role: system\n  content: '{{ greet }} Short.'\n")
    (directory / "locales" / "en-US.yml").write_text("title: Helper\ngreet: Be helpful.\n")
    (directory / "locales" / "zh-CN.yml").write_text("name: 助手\ndescription: 回答\ngreet: 请帮忙。\n")
    assistant = AppLoader(tmp_path, environ={}).get("helper")
    assert assistant.name == "Helper"  # loaded in the default locale
    zh = localized(assistant, "zh-cn")
    assert (zh.name, zh.package.description) == ("助手", "回答")
    assert [p.content for p in zh.prompts] == ["请帮忙。"]
    assert [p.content for p in zh.presets["short"]] == ["请帮忙。 Short."]
    fr = localized(assistant, "fr")
    assert (fr.name, fr.package.description, fr.prompts[0].content) == ("Helper", "Answers", "Be helpful.")
    assert assistant.prompts[0].content == "{{ greet }}"  # the loaded assistant is left as it was
