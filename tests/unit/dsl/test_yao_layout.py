"""Yao applications load unchanged: Yao's development app (vendored) and the starter layout.

The dev app's warnings are pinned in `yao_dev_app_warnings.txt` (one `file:line: key: message`
per line): a new warning, or one that disappears, fails the test. Regenerate with
`python -m tests.unit.dsl.test_yao_layout > tests/unit/dsl/yao_dev_app_warnings.txt`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli.app import app as cli
from orchestrator.dsl import AppLoader, AssistantMode
from orchestrator.dsl.connectors import file_id
from orchestrator.errors import ConfigError
from tests.unit.dsl.conftest import AppWriter

DEV_APP = Path(__file__).resolve().parents[2] / "fixtures" / "yao-dev-app"
GOLDEN = Path(__file__).with_name("yao_dev_app_warnings.txt")
SANDBOX_V2 = (
    "computer-filter",
    "full-prepare",
    "hooks-only",
    "host-mode",
    "jsapi-v2",
    "longrunning-cli",
    "oneshot-cli",
    "opencode-oneshot-cli",
    "opencode-session-cli",
    "opencode-vision-cli",
    "session-cli",
)


def app_environ(app: Path) -> dict[str, str]:
    """Every `$ENV.` variable the app references, set (as a Yao user would have them)."""
    names: set[str] = set()
    for path in app.rglob("*"):
        if path.is_file() and path.suffix in (".yao", ".yml", ".json", ".jsonc"):
            names.update(re.findall(r"\$ENV\.([A-Za-z_][A-Za-z0-9_]*)", path.read_text(errors="replace")))
    return {name: "https://llm.example.invalid" for name in names}


def dev_loader() -> AppLoader:
    return AppLoader(DEV_APP, environ=app_environ(DEV_APP))


def test_every_dev_app_assistant_loads() -> None:
    loader = dev_loader()
    report = loader.load_all()
    assert report.errors == ()
    app_ids = [i for i in loader.ids() if not i.startswith("__yao.")]
    assert len(app_ids) == 88
    assert sorted(report.ids) == sorted(loader.ids())
    for name in SANDBOX_V2:
        assistant = loader.get(f"tests.sandbox-v2.{name}")
        assert assistant.sandbox is not None and assistant.mode is AssistantMode.RUNNER, name


def test_dev_app_warnings_are_exactly_the_pinned_ones() -> None:
    found = [str(w) for w in dev_loader().load_all().warnings]
    assert found == GOLDEN.read_text(encoding="utf-8").splitlines()
    assert len(found) == len(set(found))  # one warning per key


def test_dev_app_global_layer() -> None:
    loader = dev_loader()
    agent = loader.agent_config
    # agent/agent.yml: system.default is the default role; uses.default names an assistant
    assert agent.role_connector("default") == "deepseek.v3"
    assert agent.role_connector("light") == "deepseek.v3"
    assert (agent.uses.default, agent.uses.title, agent.uses.robot_prompt) == (
        "yaobots",
        "workers.system.title",
        "__yao.robot_prompt",
    )  # Yao's default fills what the file leaves out
    hello = loader.get("hello")
    # {{ }} templates from the assistant's locales (flattened, list indexes as keys)
    assert hello.name == "Hello Assistant"
    assert hello.package.placeholder is not None
    assert hello.package.placeholder.prompts[0] == "Just say hello to the user."
    assert hello.messages["en"]["chat.title"] == "New Chat"
    assert hello.messages["zh-cn"]["Test"]  # agent/locales/ under the assistant's own
    # global prompts from agent/prompts.yml, unless disable_global_prompts
    assert "Current Time: $SYS.DATETIME" in hello.global_prompts[0].content
    assert loader.get("tests.fullfields").global_prompts == ()


def test_dev_app_ids_hooks_scripts_and_local_mcps() -> None:
    loader = dev_loader()
    # connector ids as Yao derives them: folders dotted, dots in names become "_"
    assert {"claude.sonnet-3_5", "claude.sonnet-3_7", "deepseek.v3", "openai.gpt-4o"} <= set(
        loader.connector_ids()
    )
    with pytest.raises(ConfigError, match="not a model connector"):
        loader.connector("mysql")
    # assistant-local mcps/ folders are app-wide servers, ids as Yao derives them
    assert {
        "agents.robot.host.tools",
        "agents.tests.mcpload.test",
        "agents.tests.mcpload.nested.tool",
    } <= set(loader.mcp_server_ids())
    host = loader.get("robot.host")
    assert [s.id for s in host.mcp_servers] == ["agents.robot.host.tools"]
    (tool,) = host.mcp_servers[0].process_tools
    assert (tool.name, tool.process) == ("confirm_task", "agents.robot.host.tools.ConfirmTask")
    assert tool.input_schema["required"] == ["goals"]  # from mcps/mapping/tools/schemes/confirm_task.in.yao
    assert host.hooks_language == "typescript" and set(host.scripts) == {"tools"}
    messages = loader.get("tests.messages")
    assert messages.mode is AssistantMode.HOOK
    assert set(messages.scripts) == {"action", "basic", "code", "error", "markdown"}
    reader = loader.get("experts.web-reader")
    assert set(reader.scripts) == {"fetch"}  # fetch_test.ts is a test, not a script
    fullfields = loader.get("tests.fullfields")
    assert set(fullfields.presets) >= {"chat", "chat.friendly", "chat.professional", "task.analysis"}
    assert fullfields.package.capabilities.startswith("Can search the web")


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("claude/sonnet-3.5.conn.yao", "claude.sonnet-3_5"),
        ("a.b/c.conn.yao", "a_b.c"),
        ("gpt.conn.json", "gpt"),
    ],
)
def test_file_ids_follow_yao(rel: str, expected: str) -> None:
    assert file_id(rel, (".conn.yao", ".conn.jsonc", ".conn.json")) == expected


STARTER = {
    "agent/agent.yml": (
        'uses:\n  default: "yao"\n  title: "__yao.title"\n  db: "builtin"\n'
        'system:\n  default: "$ENV.DEFAULT_LLM"\n  light: "openai.gpt-4o-mini"\n  keyword: "$ENV.DEFAULT_LLM"\n'
        'store:\n  max_size: 12\n  expiration: "90d"\ncache: "__yao.agent.cache"\n'
    ),
    "agent/prompts.yml": "- role: system\n  content: Global rules.\n",
    "agent/locales/en-us.yml": "General: General\nbrand: Yao Agents\n",
    "agent/search.yml": "web:\n  provider: tavily\n",
    "connectors/openai/gpt-4o.conn.yao": '{"label": "GPT-4o", "type": "openai", "options": {"model": "gpt-4o",'
    ' "key": "$ENV.OPENAI_API_KEY"}}',
    "connectors/openai/gpt-4o-mini.conn.yao": '{"type": "openai", "options": {"model": "gpt-4o-mini",'
    ' "key": "$ENV.OPENAI_API_KEY"}}',
    "connectors/claude/sonnet-4.5.conn.yao": '{"type": "anthropic", "options": {"model": "claude-sonnet-4-5",'
    ' "key": "$ENV.ANTHROPIC_API_KEY", "capabilities": {"vision": true, "max_input_tokens": 200000}}}',
    "assistants/yao/package.yao": '{"name": "{{ name }}", "description": "{{ description }} for {{ brand }}",'
    ' "connector": "use::light", "db": ["users"], "modes": "chat"}',
    "assistants/yao/prompts.yml": "- role: system\n  content: You are {{ name }}.\n",
    "assistants/yao/locales/en-us.yml": "name: Yao\ndescription: The assistant\n",
    "assistants/llms/package.yao": '{"name": "LLMs", "connector": "claude.sonnet-4_5",'
    ' "prompts": "- role: system\\n  content: From a YAML string\\n"}',
}
STARTER_ENV = {"DEFAULT_LLM": "openai.gpt-4o", "OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant"}


def test_starter_layout_loads(write_app: AppWriter) -> None:
    loader = AppLoader(write_app(STARTER), environ=STARTER_ENV, builtin_dir=None)
    report = loader.load_all()
    assert report.errors == ()
    yao = loader.get("yao")
    assert (yao.name, yao.package.description) == ("Yao", "The assistant for Yao Agents")
    assert yao.connector == "openai.gpt-4o-mini"  # use::light through system.light
    assert [p.content for p in yao.global_prompts] == ["Global rules."]
    assert yao.history_size == 12
    assert yao.package.db is not None and yao.package.db.models == ("users",)
    llms = loader.get("llms")
    assert llms.connector == "claude.sonnet-4_5" and llms.prompts[0].content == "From a YAML string"
    assert loader.connector("claude.sonnet-4_5").capabilities.max_input_tokens == 200000  # type: ignore[union-attr]
    assert loader.agent_config.role_connector("default") == "openai.gpt-4o"
    keys = {(str(w.file), w.key_path) for w in report.warnings}
    assert keys == {
        ("agent/agent.yml", "uses.default"),
        ("agent/agent.yml", "uses.db"),  # uses.title names chats
        ("agent/agent.yml", "system.keyword"),
        ("agent/agent.yml", "store.expiration"),
        ("agent/agent.yml", "cache"),
        ("agent/search.yml", ""),
        ("assistants/yao/package.yao", "db"),
        ("assistants/yao/package.yao", "modes"),
    }


def test_cage_validate_prints_warnings_and_strict_fails(
    write_app: AppWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = write_app(STARTER)
    for name, value in STARTER_ENV.items():
        monkeypatch.setenv(name, value)
    ok = CliRunner().invoke(cli, ["--app", str(app), "validate"])
    assert ok.exit_code == 0, ok.output
    assert "assistants OK" in ok.stdout and "(8 warnings)" in ok.stdout
    assert "warning: agent/agent.yml:11: store.expiration: has no effect in Cage" in ok.stderr
    strict = CliRunner().invoke(cli, ["--app", str(app), "validate", "--strict"])
    assert strict.exit_code == 2
    assert "error: agent/agent.yml:11: store.expiration" in strict.stderr


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"assistants/a/package.yao": '{"name": "A",\n "hookz": {}}'},
            "assistants/a/package.yao:2: hookz: unknown key",
        ),
        ({"agent/agent.yml": "uses:\n  titel: x\n"}, "agent/agent.yml:2: uses.titel: unknown key"),
        ({"agent/agent.yml": "system:\n  lite: x\n"}, "agent/agent.yml:2: system.lite: unknown key"),
        (
            {"mcps/p.mcp.yao": '{"transport": "process",\n "tool": {"a": "b"}}'},
            "mcps/p.mcp.yao:2: tool: unknown key",
        ),
        (
            {"assistants/a/src/index.ts": "", "assistants/a/src/index.py": ""},
            "assistants/a/src: src/index.ts and src/index.py both define hooks",
        ),
    ],
)
def test_keys_yao_does_not_define_stay_errors(
    write_app: AppWriter, files: dict[str, str], expected: str
) -> None:
    base = {
        "assistants/a/package.yao": '{"name": "A"}',
        "assistants/a/prompts.yml": "- role: system\n  content: x\n",
    }
    loader = AppLoader(write_app({**base, **files}), environ={}, builtin_dir=None)
    report = loader.load_all()
    messages = [str(e) for e in report.errors]
    if "mcps/" in expected:
        messages += [str(e) for e in report.mcp_errors.values()]
    assert any(m.startswith(expected) for m in messages), messages


def test_root_agent_yml_is_ignored_beside_agent_dir(write_app: AppWriter) -> None:
    app = write_app(
        {
            "agent.yml": "runner: codex\n",
            "agent/agent.yml": "runner: opencode\n",
            "assistants/a/package.yao": '{"name": "A"}',
            "assistants/a/sandbox.yao": '{"version": "2.0"}',
        }
    )
    loader = AppLoader(app, environ={}, builtin_dir=None)
    report = loader.load_all()
    assert loader.get("a").sandbox.runner.name == "opencode"  # type: ignore[union-attr]
    assert [str(w) for w in report.warnings] == [
        "agent.yml: ignored: agent/agent.yml is the application's agent.yml"
    ]


if __name__ == "__main__":  # regenerate the golden list
    sys.stdout.write("".join(f"{w}\n" for w in dev_loader().load_all().warnings))
