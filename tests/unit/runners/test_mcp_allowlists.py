"""The MCP tool allowlist (`mcp.servers[].tools`) in what each CLI adapter writes: Claude Code
settings with a PreToolUse hook blocking the unlisted tools (in every permission mode), opencode
`tools`/`permission` entries hiding and denying them. Real CLIs:
`tests/integration/runners/test_mcp_allowlist.py`."""

from __future__ import annotations

import json
import re

from orchestrator.dsl import ConnectorSpec, ConnectorType, McpServerSpec
from runners.base import RunnerExec, TurnRequest
from runners.claude.mcp import allowlist_hooks
from runners.registry import adapter_for

NARROW = McpServerSpec(
    id="bare", transport="stdio", command="python3", args=("bare.py",), tools=("echo", "a.b")
)
WIDE = McpServerSpec(id="wide", transport="stdio", command="python3", args=("w.py",))


def build(runner: str, kind: ConnectorType, **extra: object) -> RunnerExec:
    connector = ConnectorSpec(id="c", label="c", type=kind, model="m", base_url="http://127.0.0.1:9")
    turn = TurnRequest(
        assistant_id="a",
        owner="o",
        session_id="session",
        turn_id="turn",
        prompt="hi",
        connector=connector,
        mcp_servers=(NARROW, WIDE),
        **extra,
    )  # type: ignore[arg-type]
    return adapter_for(runner).build_exec(turn)


def content(exec_: RunnerExec, suffix: str) -> str:
    (text,) = [f.content for f in exec_.files if f.path.endswith(suffix)]
    return text


def test_claude_blocks_exactly_the_unlisted_tools_of_a_narrowed_server() -> None:
    (entry,) = allowlist_hooks((NARROW, WIDE))["hooks"]["PreToolUse"]  # type: ignore[index]
    matcher = re.compile(entry["matcher"])  # type: ignore[index]
    assert matcher.search("mcp__bare__secret") and matcher.search("mcp__bare__echoes")
    assert not matcher.search("mcp__bare__echo") and not matcher.search("mcp__bare__a.b")
    assert not matcher.search("mcp__wide__anything") and not matcher.search("Bash")
    exec_ = build("claude", ConnectorType.ANTHROPIC)
    settings = json.loads(content(exec_, "mcp-allowlist.json"))
    assert settings == allowlist_hooks((NARROW, WIDE))
    flags = list(exec_.argv)
    assert flags[flags.index("--settings") + 1].endswith("mcp-allowlist.json")


def test_claude_asking_turn_keeps_its_ask_rules_and_adds_the_hook() -> None:
    settings = json.loads(
        content(build("claude", ConnectorType.ANTHROPIC, ask_permissions=True), "permissions.json")
    )
    assert settings["permissions"]["ask"] and settings["hooks"]["PreToolUse"][0]["matcher"].startswith(
        "^mcp__bare__"
    )


def test_opencode_hides_and_denies_the_unlisted_tools() -> None:
    config = json.loads(content(build("opencode", ConnectorType.OPENAI), "opencode.json"))
    assert config["tools"] == {"bare_*": False, "bare_echo": True, "bare_a_b": True}
    permission = config["permission"]
    assert permission["bare_*"] == "deny" and permission["bare_echo"] == "allow"
    keys = list(permission)
    assert keys.index("bare_*") < keys.index("bare_echo")  # the later, more specific entry wins
    assert not any(key.startswith("wide_") for key in permission)
