"""Bad inputs: every error names the file relative to the app dir, the key path and the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.dsl import AppLoader
from orchestrator.dsl.diagnostics import flatten
from tests.unit.dsl.conftest import CHAT_PROMPTS, AppWriter

BASE = {
    "agent.yml": "roles:\n  default: main\n",
    "connectors/main.conn.yao": '{"type": "openai", "options": {"key": "literal-key-123456"}}',
    "mcps/tools.mcp.yao": '{"transport": "stdio", "command": "tool-server"}',
    "assistants/a/package.yao": '{"name": "A"}',
    "assistants/a/prompts.yml": CHAT_PROMPTS,
}
SB = '{\n "version": "2.0",\n "runner": {"name": "claude"},\n'  # a sandbox.yao head; key lines start at 4

CASES: list[tuple[str, dict[str, str], str]] = [
    (
        "ports-mixed",
        {"assistants/a/sandbox.yao": SB + ' "computer": {"ports": [\n  3000,\n  {"port": 1}]}}'},
        "assistants/a/sandbox.yao:6: computer.ports[1]: cannot mix ints and objects",
    ),
    (
        "ports-mixed-obj-first",
        {"assistants/a/sandbox.yao": SB + ' "computer": {"ports": [{"port": 1},\n 2]}}'},
        "assistants/a/sandbox.yao:5: computer.ports[1]: cannot mix ints and objects",
    ),
    (
        "unknown-top-key",
        {"assistants/a/sandbox.yao": SB + ' "mode": "x"}'},
        "assistants/a/sandbox.yao:4: mode: unknown key",
    ),
    (
        "unknown-computer-key",
        {"assistants/a/sandbox.yao": SB + ' "computer": {\n  "gpu": 1}}'},
        "assistants/a/sandbox.yao:5: computer.gpu: unknown key",
    ),
    (
        "version",
        {"assistants/a/sandbox.yao": '{"runner": {"name": "claude"},\n "version": "1.0"}'},
        "assistants/a/sandbox.yao:2: version: Input should be '2.0'",
    ),
    (
        "version-missing",
        {"assistants/a/sandbox.yao": '{"runner": {"name": "claude"}}'},
        "assistants/a/sandbox.yao:1: version: required key is missing",
    ),
    (
        "runner-name",
        {"assistants/a/sandbox.yao": '{"version": "2.0",\n "runner": {"name": "gpt"}}'},
        "assistants/a/sandbox.yao:2: runner.name: unknown runner 'gpt'; expected one of claude, opencode, "
        "codex, "
        "yaocode, tai",
    ),
    (
        "runner-missing",
        {"assistants/a/sandbox.yao": '{"version": "2.0"}'},
        "assistants/a/sandbox.yao:1: runner: required key is missing",
    ),
    (
        "lifecycle",
        {"assistants/a/sandbox.yao": SB + ' "lifecycle": "forever"}'},
        "assistants/a/sandbox.yao:4: lifecycle: Input should be 'oneshot', 'session', 'longrunning' "
        "or 'persistent'",
    ),
    (
        "memory",
        {"assistants/a/sandbox.yao": SB + ' "computer": {"memory": "2XB"}}'},
        "assistants/a/sandbox.yao:4: computer.memory: invalid memory size '2XB'",
    ),
    (
        "duration",
        {"assistants/a/sandbox.yao": SB + ' "idle_timeout": "10 minutes"}'},
        "assistants/a/sandbox.yao:4: idle_timeout: invalid duration '10 minutes'",
    ),
    (
        "prepare-action",
        {"assistants/a/sandbox.yao": SB + ' "prepare": [\n  {"action": "run", "cmd": "x"}]}'},
        "assistants/a/sandbox.yao:5: prepare[0]: Input tag 'run' found using 'action' does not match any "
        "of the "
        "expected tags: 'file', 'copy', 'exec'",
    ),
    (
        "prepare-cmd-missing",
        {
            "assistants/a/sandbox.yao": SB + ' "prepare": [{"action": "file", "path": "a"},\n'
            '  {"action": "exec"}]}'
        },
        "assistants/a/sandbox.yao:5: prepare[1].cmd: required key is missing",
    ),
    (
        "port-missing",
        {"assistants/a/sandbox.yao": SB + ' "computer": {"ports": [{"label": "web"}]}}'},
        "assistants/a/sandbox.yao:4: computer.ports[0].port: required key is missing",
    ),
    (
        "port-range",
        {"assistants/a/sandbox.yao": SB + ' "computer": {"ports": [\n 70000]}}'},
        "assistants/a/sandbox.yao:5: computer.ports[0].port: Input should be less than or equal to 65535",
    ),
    (
        "vnc-resolution",
        {"assistants/a/sandbox.yao": SB + ' "computer": {"vnc": {\n "resolution": "big"}}}'},
        "assistants/a/sandbox.yao:5: computer.vnc.resolution: resolution must look like 1920x1080, got 'big'",
    ),
    (
        "env-name",
        {"assistants/a/sandbox.yao": SB + ' "environment": {"1A": "x"}}'},
        "assistants/a/sandbox.yao:4: environment: invalid environment variable name '1A'",
    ),
    (
        "env-missing",
        {"assistants/a/sandbox.yao": SB + ' "environment": {\n  "X": "$ENV.CAGE_TEST_UNSET_X"}}'},
        "assistants/a/sandbox.yao:5: environment.X: environment variable CAGE_TEST_UNSET_X is not set",
    ),
    (
        "env-malformed",
        {"assistants/a/sandbox.yao": SB + ' "environment": {"X": "$ENV.1bad"}}'},
        "assistants/a/sandbox.yao:4: environment.X: malformed reference $ENV.1bad: expected $ENV.NAME",
    ),
    (
        "secret-missing",
        {"assistants/a/sandbox.yao": SB + ' "secrets": {"GH": {\n "value": "$ENV.CAGE_TEST_GH"}}}'},
        "assistants/a/sandbox.yao:5: secrets.GH.value: environment variable CAGE_TEST_GH is not set",
    ),
    (
        "filter-kind",
        {"assistants/a/sandbox.yao": SB + ' "filter": {"kind": ["box", "vm"]}}'},
        "assistants/a/sandbox.yao:4: filter.kind[1]: Input should be 'box' or 'host'",
    ),
    (
        "work-dir",
        {"assistants/a/sandbox.yao": SB + ' "computer": {"work_dir": "work"}}'},
        "assistants/a/sandbox.yao:4: computer.work_dir: must be an absolute path without '..', got 'work'",
    ),
    (
        "runner-connector-unknown",
        {
            "assistants/a/sandbox.yao": '{"version": "2.0",\n "runner": {"name": "claude",\n'
            ' "connectors": {\n  "heavy": "nope"}}}'
        },
        "assistants/a/sandbox.yao:4: runner.connectors.heavy: connector 'nope' is not defined",
    ),
    (
        "sandbox-syntax",
        {"assistants/a/sandbox.yao": '{"version": "2.0"\n "runner": {}}'},
        "assistants/a/sandbox.yao:2: invalid JSONC: expected ',' or '}', found '\"' (column 2)",
    ),
    (
        "package-name-missing",
        {"assistants/a/package.yao": '{\n "description": "x"}'},
        "assistants/a/package.yao:1: name: required key is missing",
    ),
    (
        "package-unknown-key",
        {"assistants/a/package.yao": '{"name": "A",\n "colour": "red"}'},
        "assistants/a/package.yao:2: colour: unknown key",
    ),
    (
        "package-connector-unknown",
        {"assistants/a/package.yao": '{"name": "A",\n "connector": "nope"}'},
        "assistants/a/package.yao:2: connector: connector 'nope' is not defined",
    ),
    (
        "package-connector-role",
        {"assistants/a/package.yao": '{"name": "A",\n "connector": "use::huge"}'},
        "assistants/a/package.yao:2: connector: unknown role 'huge'; expected one of default, light, "
        "heavy, vision, audio",
    ),
    (
        "package-connector-env",
        {"assistants/a/package.yao": '{"name": "A",\n "connector": "$ENV.CAGE_TEST_CONN"}'},
        "assistants/a/package.yao:2: connector: environment variable CAGE_TEST_CONN is not set",
    ),
    (
        "package-mcp-option",
        {"assistants/a/package.yao": '{"name": "A", "mcp": {\n "options": {"max_turns": 3}}}'},
        "assistants/a/package.yao:2: mcp.options.max_turns: unknown key (did you mean max_turn?)",
    ),
    (
        "package-temperature",
        {"assistants/a/package.yao": '{"name": "A",\n "options": {"temperature": 5}}'},
        "assistants/a/package.yao:2: options.temperature: Input should be less than or equal to 2",
    ),
    (
        "package-embedded-sandbox",
        {
            "assistants/a/package.yao": '{"name": "A", "sandbox": {"version": "2.0",\n'
            ' "runner": {"name": "claude"},\n "computer": {"gpu": true}}}'
        },
        "assistants/a/package.yao:3: sandbox.computer.gpu: unknown key",
    ),
    (
        "package-embedded-not-object",
        {"assistants/a/package.yao": '{"name": "A",\n "sandbox": "yes"}'},
        'assistants/a/package.yao:2: sandbox: must be an object with version "2.0"',
    ),
    (
        "package-tags",
        {"assistants/a/package.yao": '{"name": "A",\n "tags": [1]}'},
        "assistants/a/package.yao:2: tags[0]: Input should be a valid string",
    ),
    (
        "package-syntax",
        {"assistants/a/package.yao": '{"name": "A",,}'},
        "assistants/a/package.yao:1: invalid JSONC: expected a quoted key or '}', found ',' (column 14)",
    ),
    (
        "nothing-to-run",
        {"assistants/a/package.yao": '{"name": "A"}', "assistants/a/prompts.yml": ""},
        "assistants/a/package.yao: nothing to run: add prompts.yml, mcp servers, sandbox.yao or src/index.ts",
    ),
    (
        "prompt-role",
        {"assistants/a/prompts.yml": "- role: system\n  content: a\n- role: robot\n  content: b\n"},
        "assistants/a/prompts.yml:3: [1].role: Input should be 'system', 'user', 'assistant' or 'developer'",
    ),
    (
        "prompt-content",
        {"assistants/a/prompts.yml": "- role: system\n"},
        "assistants/a/prompts.yml:1: [0].content: required key is missing",
    ),
    (
        "prompts-not-list",
        {"assistants/a/prompts.yml": "role: system\n"},
        "assistants/a/prompts.yml:1: must be a list of {role, content} messages",
    ),
    (
        "preset",
        {"assistants/a/prompts/brief.yml": "- role: system\n  content: a\n  tone: dry\n"},
        "assistants/a/prompts/brief.yml:3: [0].tone: unknown key",
    ),
    (
        "locale",
        {"assistants/a/locales/en.yml": "- just\n- a list\n"},
        "assistants/a/locales/en.yml:1: a locale file must map message keys to text",
    ),
    (
        "prompts-yaml-syntax",
        {"assistants/a/prompts.yml": "- role: [system\n"},
        "assistants/a/prompts.yml:2: invalid YAML:",
    ),
    (
        "agent-unknown-key",
        {"agent.yml": "roles:\n  default: main\ncolour: red\n"},
        "agent.yml:3: colour: unknown key",
    ),
    (
        "agent-runner",
        {"agent.yml": "runner: gpt\n"},
        "agent.yml:1: runner: unknown runner 'gpt'; expected one of claude, opencode, codex, yaocode, tai",
    ),
    (
        "agent-role-connector",
        {"agent.yml": "roles:\n  default: main\n  heavy: ghost\n"},
        "agent.yml:3: roles.heavy: connector 'ghost' is not defined",
    ),
    (
        "agent-inline-connector",
        {
            "agent.yml": "connectors:\n  inl:\n    type: openai\n    options:\n      key: x\n"
            "      colour: red\n"
        },
        "agent.yml:6: connectors.inl.options.colour: unknown key",
    ),
    (
        "connector-env",
        {"connectors/main.conn.yao": '{"type": "openai",\n "options": {\n  "key": "$ENV.CAGE_TEST_KEY"}}'},
        "connectors/main.conn.yao:3: options.key: environment variable CAGE_TEST_KEY is not set",
    ),
    (
        "connector-type",
        {"connectors/main.conn.yao": '{\n "type": "gemini"}'},
        "connectors/main.conn.yao:2: type: Input should be 'openai' or 'anthropic'",
    ),
    (
        "connector-host",
        {"connectors/main.conn.yao": '{"type": "openai", "options": {\n "host": "api.x.com"}}'},
        "connectors/main.conn.yao:2: options.host: host must start with http:// or https://",
    ),
    (
        "mcp-stdio-command",
        {"mcps/tools.mcp.yao": '{"transport": "stdio"}'},
        "mcps/tools.mcp.yao:1: transport stdio needs a command",
    ),
    (
        "mcp-token-env",
        {
            "mcps/tools.mcp.yao": '{"transport": "http", "url": "https://mcp.example.com",\n'
            ' "authorization_token": "$ENV.CAGE_TEST_MCP"}'
        },
        "mcps/tools.mcp.yao:2: authorization_token: environment variable CAGE_TEST_MCP is not set",
    ),
    (
        "mcp-transport",
        {"mcps/tools.mcp.yao": '{"transport": "grpc", "command": "x"}'},
        "mcps/tools.mcp.yao:1: transport: Input should be 'stdio', 'http', 'sse' or 'process'",
    ),
    (
        "bad-dir-name",
        {"assistants/a.b/package.yao": '{"name": "X"}', "assistants/a.b/prompts.yml": CHAT_PROMPTS},
        "assistants/a.b: directory name 'a.b' cannot form an assistant id (use letters, digits, '_' and '-')",
    ),
]


def _messages(app: Path) -> list[str]:
    report = AppLoader(app, environ={}, builtin_dir=None).load_all()
    errors = [*report.errors, *report.connector_errors.values(), *report.mcp_errors.values()]
    return [str(e) for err in errors for e in flatten(err)]


@pytest.mark.parametrize(("name", "files", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_located(write_app: AppWriter, name: str, files: dict[str, str], expected: str) -> None:
    messages = _messages(write_app({**BASE, **files}))
    assert any(m.startswith(expected) for m in messages), f"{name}: {messages}"
    for m in messages:
        assert "literal-key-123456" not in m
        assert "errors.pydantic.dev" not in m


def test_there_are_at_least_thirty_distinct_cases() -> None:
    assert len({c[0] for c in CASES}) == len(CASES) >= 30


def test_one_bad_assistant_does_not_hide_the_others(write_app: AppWriter) -> None:
    app = write_app(
        {
            **BASE,
            "assistants/b/package.yao": '{"name": "B", "colour": 1}',
            "assistants/b/prompts.yml": CHAT_PROMPTS,
            "assistants/c/package.yao": '{"name": "C"}',
            "assistants/c/prompts.yml": CHAT_PROMPTS,
        }
    )
    report = AppLoader(app, environ={}, builtin_dir=None).load_all()
    assert report.ids == ["a", "c"]
    assert [str(e) for e in report.errors] == ["assistants/b/package.yao:1: colour: unknown key"]


def test_several_errors_of_one_assistant_are_all_reported(write_app: AppWriter) -> None:
    app = write_app(
        {
            **BASE,
            "assistants/a/package.yao": '{"name": "A",\n "colour": 1}',
            "assistants/a/sandbox.yao": '{"version": "2.0", "runner": {"name": "claude"},'
            '\n "lifecycle": "x"}',
            "assistants/a/prompts.yml": "- role: nobody\n  content: x\n",
        }
    )
    messages = _messages(app)
    assert [m.split(":")[0] for m in messages] == [
        "assistants/a/package.yao",
        "assistants/a/sandbox.yao",
        "assistants/a/prompts.yml",
    ]
