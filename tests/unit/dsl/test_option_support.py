"""`cage validate` refuses the package `options` and `mcp.options` a runner cannot honour, with
file, line and key path and the reason; what a runner can honour passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli.validation import turn_refusals
from orchestrator.dsl import AppLoader


def app_with(tmp_path: Path, runner: str, package: dict[str, Any], conn_type: str = "anthropic") -> Path:
    root = tmp_path / "app"
    (root / "connectors").mkdir(parents=True)
    conn = {
        "label": "main",
        "type": conn_type,
        "options": {"model": "m", "key": "k", "host": "http://127.0.0.1:9"},
    }
    (root / "connectors" / "main.conn.yao").write_text(json.dumps(conn))
    (root / "agent.yml").write_text("roles:\n  default: main\n")
    adir = root / "assistants" / "t" / "a"
    adir.mkdir(parents=True)
    lines = ["{", '  "name": "A",', '  "connector": "main",']
    lines += [f'  "{key}": {json.dumps(value)},' for key, value in package.items()]
    lines.append("}")
    (adir / "package.yao").write_text("\n".join(lines) + "\n")
    (adir / "sandbox.yao").write_text(json.dumps({"version": "2.0", "runner": {"name": runner}}))
    return root


def refusals(root: Path) -> list[tuple[str, int | None, str]]:
    report = AppLoader(root, environ={}).load_all()
    assert report.errors == ()
    return [(e.key_path, e.line, e.reason) for e in turn_refusals(root, report)]


@pytest.mark.parametrize(
    ("runner", "refused"),
    [
        ("claude", ["options.temperature", "options.seed"]),
        ("opencode", ["options.seed"]),
        ("codex", ["options.temperature", "options.max_tokens", "options.seed"]),
        ("yaocode", ["options.seed"]),  # an Anthropic connector has no seed
        ("tai", ["options.seed"]),
    ],
)
def test_each_runner_refuses_what_it_cannot_apply(tmp_path: Path, runner: str, refused: list[str]) -> None:
    root = app_with(
        tmp_path, runner, {"options": {"model": "other", "temperature": 0.2, "max_tokens": 100, "seed": 1}}
    )
    found = refusals(root)
    assert [key for key, _, _ in found] == refused
    assert all(line == 4 for _, line, _ in found)  # the `options` line of package.yao
    assert all(f"the {runner} runner" in reason or "Anthropic" in reason for _, _, reason in found)


def test_an_openai_connector_takes_every_option_on_the_native_runners(tmp_path: Path) -> None:
    options = {"seed": 1, "presence_penalty": 0.5, "reasoning_effort": "low", "user": "x"}
    assert refusals(app_with(tmp_path, "tai", {"options": options}, conn_type="openai")) == []


def test_extra_provider_keys_are_refused_by_the_cli_runners(tmp_path: Path) -> None:
    ((key, _, reason),) = refusals(app_with(tmp_path, "opencode", {"options": {"top_k": 3}}))
    assert key == "options.top_k" and "provider keys" in reason


def test_mcp_options_a_runner_cannot_apply_are_refused(tmp_path: Path) -> None:
    mcp = {"servers": [], "options": {"max_turn": 3, "max_retries": 1}}
    found = refusals(app_with(tmp_path, "yaocode", {"mcp": mcp}))
    assert [(key, line) for key, line, _ in found] == [("mcp.options.max_retries", 4)]
    found = refusals(app_with(tmp_path / "c", "claude", {"mcp": mcp}))
    assert [key for key, _, _ in found] == ["mcp.options.max_turn", "mcp.options.max_retries"]
    assert "runner.options.max_turns" in found[0][2]
