"""AppLoader: discovery, LRU cache, reload, read-only ids, connectors, MCP, agent.yml merging."""

from __future__ import annotations

import hashlib
import inspect
import json
from datetime import timedelta
from pathlib import Path

import pytest

import orchestrator.dsl as dsl
import orchestrator.dsl.loader as loader_module
from orchestrator.dsl import AppLoader, AssistantMode, Lifecycle
from orchestrator.errors import ConfigError, Forbidden, NotFound
from orchestrator.redaction import redact
from tests.unit.dsl.conftest import CHAT_PROMPTS, AppWriter

REPO = Path(__file__).resolve().parents[3]

AGENT = """uses:
  default: main
  vision: vision-helper
  search: searcher
roles:
  default: main
  heavy: big
runner: opencode
history_size: 7
fallback: custom.fallback
connectors:
  big:
    type: anthropic
    label: Big
    options:
      model: claude-x
      key: $ENV.BIG_KEY
      host: https://llm.example.com/
"""
MAIN_CONN = '{"label": "Main", "type": "openai", "options": {"model": "gpt-x", "key": "$ENV.MAIN_KEY"}}'


def _app(write_app: AppWriter, extra: dict[str, str] | None = None) -> Path:
    return write_app(
        {
            "agent.yml": AGENT,
            "connectors/main.conn.yao": MAIN_CONN,
            "mcps/search.mcp.yao": '{"transport": "sse", "url": "https://mcp.example.com/sse",'
            ' "authorization_token": "$ENV.MCP_TOKEN", "headers": {"X-Team": "t1"}}',
            "mcps/local/files.mcp.yao": '{"transport": "stdio", "command": "files-mcp",'
            ' "arguments": ["--root", "/w"],'
            ' "env": {"LEVEL": "debug"}}',
            "assistants/chat/package.yao": '{"name": "Chat"}',
            "assistants/chat/prompts.yml": CHAT_PROMPTS,
            **(extra or {}),
        }
    )


ENV = {"MAIN_KEY": "main-key-abcdef", "BIG_KEY": "big-key-ghijkl", "MCP_TOKEN": "mcp-token-mnopqr"}


def test_connectors_from_files_and_agent_yml(write_app: AppWriter) -> None:
    loader = AppLoader(_app(write_app), environ=ENV, builtin_dir=None)
    main = loader.connector("main")
    assert (main.label, main.type, main.model, main.base_url) == (
        "Main",
        "openai",
        "gpt-x",
        "https://api.openai.com",
    )
    assert main.key.get_secret_value() == "main-key-abcdef"
    big = loader.connector("big")
    assert (big.type, big.model, big.base_url) == ("anthropic", "claude-x", "https://llm.example.com")
    assert "big-key-ghijkl" not in repr(big) and "big-key-ghijkl" not in big.model_dump_json()
    assert redact("the key is big-key-ghijkl") == "the key is ***"
    assert loader.connector_ids() == ["big", "main"]
    with pytest.raises(NotFound):
        loader.connector("nope")


def test_missing_connector_key_is_an_error_for_that_connector_only(write_app: AppWriter) -> None:
    loader = AppLoader(_app(write_app), environ={"MAIN_KEY": "main-key-abcdef"}, builtin_dir=None)
    report = loader.load_all()
    assert report.ids == ["chat"] and report.errors == ()
    assert list(report.connector_errors) == ["big"]
    assert loader.get("chat").connector == "main"
    with pytest.raises(ConfigError) as info:
        loader.connector("big")
    assert (
        str(info.value) == "agent.yml:17: connectors.big.options.key: environment variable BIG_KEY is not set"
    )


def test_agent_yml_defaults_merge_under_the_assistant(write_app: AppWriter) -> None:
    loader = AppLoader(
        _app(
            write_app,
            {
                "assistants/own/package.yao": '{"name": "Own", "connector": "use::heavy", "history_size": 3,'
                ' "uses": {"vision": "my-vision"}}',
                "assistants/own/prompts.yml": CHAT_PROMPTS,
                "assistants/light/package.yao": '{"name": "L", "connector": "use::light"}',
                "assistants/light/prompts.yml": CHAT_PROMPTS,
                "assistants/sb/package.yao": '{"name": "S"}',
                "assistants/sb/sandbox.yao": '{"version": "2.0",'
                ' "runner": {"connectors": {"light": "use::heavy"}}}',
            },
        ),
        environ=ENV,
        builtin_dir=None,
    )
    chat = loader.get("chat")
    assert (chat.connector, chat.history_size, chat.fallback) == ("main", 7, "custom.fallback")
    assert (chat.uses.vision, chat.uses.search) == ("vision-helper", "searcher")
    own = loader.get("own")
    assert (own.connector, own.history_size) == ("big", 3)
    assert (own.uses.vision, own.uses.search) == ("my-vision", "searcher")
    assert loader.get("light").connector == "main"  # unset role falls back to roles.default
    sb = loader.get("sb")
    assert sb.sandbox is not None and sb.sandbox.runner.name == "opencode"  # agent.yml runner
    assert sb.sandbox.runner.connectors["light"].connector == "big"
    assert sb.mode is AssistantMode.RUNNER


def test_env_connector_in_package(write_app: AppWriter) -> None:
    app = _app(write_app, {"assistants/chat/package.yao": '{"name": "Chat", "connector": "$ENV.CHAT_CONN"}'})
    loader = AppLoader(app, environ={**ENV, "CHAT_CONN": "big"}, builtin_dir=None)
    assert loader.get("chat").connector == "big"


def test_mcp_servers_resolve_with_filters_and_secrets(write_app: AppWriter) -> None:
    loader = AppLoader(
        _app(
            write_app,
            {
                "assistants/tools/package.yao": json.dumps(
                    {
                        "name": "T",
                        "mcp": {
                            "servers": [
                                "local.files",
                                {"search": ["find"]},
                                {"server_id": "local.files", "resources": ["r1"]},
                            ],
                            "options": {"max_turn": 2, "tool_loop": False},
                        },
                    }
                ),
            },
        ),
        environ=ENV,
        builtin_dir=None,
    )
    tools = loader.get("tools")
    assert tools.mode is AssistantMode.LLM
    files, search, files2 = tools.mcp_servers
    assert (files.transport, files.command, files.args, files.env, files.tools) == (
        "stdio",
        "files-mcp",
        ("--root", "/w"),
        {"LEVEL": "debug"},
        (),
    )
    assert (search.transport, search.url, search.tools) == ("sse", "https://mcp.example.com/sse", ("find",))
    assert search.headers == {"X-Team": "t1", "Authorization": "Bearer mcp-token-mnopqr"}
    assert "mcp-token-mnopqr" not in repr(search)
    assert files2.resources == ("r1",)
    assert (tools.mcp_options.max_turn, tools.mcp_options.tool_loop) == (2, False)
    assert loader.mcp_server("search").tools == ()
    assert loader.mcp_server_ids() == ["local.files", "search"]


def test_lru_eviction_and_reload(write_app: AppWriter) -> None:
    files = {f"assistants/n{i}/package.yao": f'{{"name": "N{i}"}}' for i in range(3)}
    files |= {f"assistants/n{i}/prompts.yml": CHAT_PROMPTS for i in range(3)}
    app = _app(write_app, files)
    loader = AppLoader(app, environ=ENV, builtin_dir=None, cache_size=2)
    first = loader.get("n0")
    loader.get("n1")
    assert loader.get("n0") is first  # a hit refreshes n0
    loader.get("n2")  # evicts n1, the least recently used
    assert loader.cached_ids() == ["n0", "n2"]
    (app / "assistants/n0/package.yao").write_text('{"name": "Renamed"}')
    assert loader.get("n0").name == "N0"  # still cached
    loader.reload("n0")
    assert loader.get("n0").name == "Renamed"
    (app / "agent.yml").write_text("history_size: 2\n")
    assert loader.get("n2").history_size == 7
    loader.reload()
    assert loader.cached_ids() == []
    assert loader.get("n2").history_size == 2


def test_a_broken_assistant_is_read_again_only_once_its_files_change(
    write_app: AppWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A title assistant with no connector is asked for after every turn of an untitled session:
    while its files stay as they are, the loader answers with the same error without reading them."""
    app = _app(write_app, {"assistants/broken/package.yao": '{"name": "B", "connector": "nope"}'})
    (app / "assistants/broken/prompts.yml").write_text(CHAT_PROMPTS)
    loader = AppLoader(app, environ=ENV, builtin_dir=None)
    loads: list[str] = []
    real = loader_module.load_assistant

    def counted(*args: object, **kwargs: object) -> object:
        loads.append(str(args[1]))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    clock = [100.0]
    monkeypatch.setattr(loader_module, "load_assistant", counted)
    monkeypatch.setattr(loader_module.time, "monotonic", lambda: clock[0])
    for step in (0, 5, 0):  # 5: past the recheck, so the files are looked at, and are the same
        clock[0] += step
        with pytest.raises(ConfigError, match="nope") as failed:
            loader.get("broken")
    assert loads == ["broken"]
    assert loader.broken("broken") and not loader.broken("chat")
    clock[0] += loader_module.RECHECK_SECONDS
    assert not loader.broken("broken")  # past the recheck: only a `get` can tell
    with pytest.raises(ConfigError):
        loader.get("broken")
    assert failed.value.__traceback__ is not None and len(list(_frames(failed.value))) < 10  # no growth
    (app / "assistants/broken/package.yao").write_text('{"name": "Fixed", "connector": "main"}')
    with pytest.raises(ConfigError, match="nope"):
        loader.get("broken")  # within a second of the last look: not looked at yet
    clock[0] += loader_module.RECHECK_SECONDS
    assert loader.get("broken").name == "Fixed" and loads == ["broken", "broken"]
    (app / "assistants/broken/package.yao").write_text('{"name": "B", "connector": "nope"}')
    loader.reload("broken")
    with pytest.raises(ConfigError):
        loader.get("broken")
    loader.reload()  # forgets failures too
    with pytest.raises(ConfigError):
        loader.get("broken")
    assert loads == ["broken"] * 4


def _frames(exc: BaseException) -> list[object]:
    tb, frames = exc.__traceback__, []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def test_unknown_id_and_new_directories(write_app: AppWriter) -> None:
    app = _app(write_app)
    loader = AppLoader(app, environ=ENV, builtin_dir=None)
    with pytest.raises(NotFound):
        loader.get("ghost")
    (app / "assistants/team/late").mkdir(parents=True)
    (app / "assistants/team/late/package.yao").write_text('{"name": "Late"}')
    (app / "assistants/team/late/prompts.yml").write_text(CHAT_PROMPTS)
    assert loader.get("team.late").id == "team.late"
    assert loader.ids() == ["chat", "team.late"]


def test_system_assistants_are_read_only(write_app: AppWriter) -> None:
    loader = AppLoader(
        _app(
            write_app,
            {
                "assistants/yao/helper/package.yao": '{"name": "H"}',
                "assistants/yao/helper/prompts.yml": CHAT_PROMPTS,
                "assistants/locked/package.yao": '{"name": "L", "readonly": true}',
                "assistants/locked/prompts.yml": CHAT_PROMPTS,
            },
        ),
        environ=ENV,
    )
    assert loader.get("__yao.loop_fallback").readonly
    assert loader.get("yao.helper").readonly
    for assistant_id in ("__yao.loop_fallback", "yao.helper", "__yao.anything", "locked"):
        with pytest.raises(Forbidden):
            loader.ensure_writable(assistant_id)
    loader.ensure_writable("chat")
    loader.ensure_writable("brand.new")
    assert not loader.get("chat").readonly


def test_builtin_fallback_assistant(write_app: AppWriter) -> None:
    loader = AppLoader(_app(write_app), environ=ENV)
    fallback = loader.get("__yao.loop_fallback")
    assert fallback.mode is AssistantMode.LLM
    assert fallback.connector == "main"
    assert fallback.prompts[0].role == "system" and "went wrong" in fallback.prompts[0].content


def test_files_of_an_assistant(write_app: AppWriter) -> None:
    loader = AppLoader(
        _app(
            write_app,
            {
                "assistants/full/package.yao": '{"name": "F", "prompt_presets": {"inline": [{"role": "user",'
                ' "content": "i"}], "brief": [{"role": "user", "content": "old"}]}}',
                "assistants/full/prompts/brief.yml": "- role: system\n  content: short\n",
                "assistants/full/locales/en-US.yml": "name: Full\n",
                "assistants/full/skills/review/SKILL.md": "review things",
                "assistants/full/skills/review/ref/x.txt": "x",
                "assistants/full/src/index.py": "async def create(ctx, messages, options):\n"
                "    return None\n",
            },
        ),
        environ=ENV,
        builtin_dir=None,
    )
    full = loader.get("full")
    assert full.mode is AssistantMode.HOOK
    assert full.hooks_path == full.path / "src" / "index.py"
    assert full.presets["brief"][0].content == "short" and full.presets["inline"][0].content == "i"
    assert full.locales == {"en-us": {"name": "Full"}}
    (skill,) = full.skills
    expected = hashlib.sha256()
    for rel, content in ((b"SKILL.md", b"review things"), (b"ref/x.txt", b"x")):
        expected.update(len(rel).to_bytes(4, "big") + rel + len(content).to_bytes(8, "big") + content)
    assert (skill.name, skill.digest) == ("review", expected.hexdigest())


def test_embedded_sandbox_and_file_precedence(write_app: AppWriter) -> None:
    embedded = (
        '{"name": "E", "sandbox": {"version": "2.0", "runner": {"name": "codex"}, "lifecycle": "session"}}'
    )
    loader = AppLoader(
        _app(
            write_app,
            {
                "assistants/emb/package.yao": embedded,
                "assistants/both/package.yao": embedded,
                "assistants/both/sandbox.yao": '{"version": "2.0", "runner": {"name": "tai"}}',
                "assistants/v1/package.yao": '{"name": "V1", "sandbox": {"version": "1.0", "image": "x"}}',
                "assistants/v1/prompts.yml": CHAT_PROMPTS,
            },
        ),
        environ=ENV,
        builtin_dir=None,
    )
    emb = loader.get("emb")
    assert emb.sandbox is not None and emb.sandbox.runner.name == "codex" and emb.mode is AssistantMode.RUNNER
    assert emb.package.sandbox == emb.sandbox
    both = loader.get("both")
    assert both.sandbox is not None and both.sandbox.runner.name == "tai"
    v1 = loader.get("v1")
    assert v1.sandbox is None and v1.mode is AssistantMode.LLM


def test_bad_agent_yml_stops_load_all(write_app: AppWriter) -> None:
    loader = AppLoader(_app(write_app, {"agent.yml": "history_size: -1\n"}), environ=ENV, builtin_dir=None)
    report = loader.load_all()
    assert report.assistants == ()
    assert [str(e) for e in report.errors] == [
        "agent.yml:1: history_size: Input should be greater than or equal to 0"
    ]
    with pytest.raises(ConfigError):
        loader.get("chat")


EXPECTED_EXAMPLES = {
    "__yao.loop_fallback": (AssistantMode.LLM, None),
    "__yao.title": (AssistantMode.LLM, None),
    "examples.chat": (AssistantMode.LLM, None),
    "examples.hooks": (AssistantMode.HOOK, None),
    "examples.claude": (AssistantMode.RUNNER, Lifecycle.SESSION),
    "examples.opencode": (AssistantMode.RUNNER, Lifecycle.ONESHOT),
    "examples.codex": (AssistantMode.RUNNER, Lifecycle.ONESHOT),
    "examples.yaocode": (AssistantMode.RUNNER, Lifecycle.LONGRUNNING),
    "examples.tai": (AssistantMode.RUNNER, Lifecycle.SESSION),
}


def test_examples_load_without_api_keys() -> None:
    report = AppLoader(REPO, environ={}).load_all()
    assert report.errors == ()
    found = {a.id: (a.mode, a.sandbox.lifecycle if a.sandbox else None) for a in report.assistants}
    assert found == EXPECTED_EXAMPLES
    runners = {a.sandbox.runner.name for a in report.assistants if a.sandbox}
    assert runners == {"claude", "opencode", "codex", "yaocode", "tai"}
    assert {k: str(v) for k, v in report.connector_errors.items()} == {
        "anthropic": "connectors/anthropic.conn.yao:7: options.key: "
        "environment variable ANTHROPIC_API_KEY is not set",
        "anthropic-light": "connectors/anthropic-light.conn.yao:8: options.key: "
        "environment variable ANTHROPIC_API_KEY is not set",
        "openai": "connectors/openai.conn.yao:7: options.key: environment variable OPENAI_API_KEY is not set",
    }


def test_examples_with_keys() -> None:
    loader = AppLoader(
        REPO, environ={"ANTHROPIC_API_KEY": "sk-ant-test-000000", "OPENAI_API_KEY": "sk-test-1111"}
    )
    assert loader.load_all().connector_errors == {}
    assert loader.connector("anthropic").timeout == timedelta(minutes=10)
    assert loader.get("examples.claude").connector == "anthropic"
    assert loader.get("examples.codex").connector == "openai"


def test_public_api_is_sorted_and_complete() -> None:
    public = [n for n, v in vars(dsl).items() if not n.startswith("_") and not inspect.ismodule(v)]
    assert dsl.__all__ == sorted(public)


def test_a_sandbox_assistant_may_not_hand_sse_credentials_to_its_agent(write_app: AppWriter) -> None:
    # The agent CLI in the box connects to its MCP servers itself: an `sse` server's headers would
    # have to enter the box (only streamable-HTTP servers go through the credential gateway).
    loader = AppLoader(
        _app(
            write_app,
            {
                "assistants/box/package.yao": '{"name": "B", "mcp": {"servers": ["local.files", "search"]}}',
                "assistants/box/sandbox.yao": '{"version": "2.0", "runner": {"name": "claude"}}',
                "assistants/tools/package.yao": '{"name": "T", "mcp": {"servers": ["search"]}}',
            },
        ),
        environ=ENV,
        builtin_dir=None,
    )
    with pytest.raises(ConfigError, match="sse transport with credentials") as info:
        loader.get("box")
    assert info.value.key_path == "mcp.servers[1]"
    assert info.value.file.name == "package.yao" and "mcp-token-mnopqr" not in str(info.value)
    assert loader.get("tools").mcp_servers[0].transport == "sse"  # LLM mode: the host holds them
