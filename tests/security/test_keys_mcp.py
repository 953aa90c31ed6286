"""Issue 12: an HTTP MCP server's token stays outside the box too.

Claude Code (real CLI, `cage run`) gets an HTTP MCP server whose `authorization_token` is a
canary. The CLI's MCP config points at the gateway and carries only the turn's gateway token; the
gateway adds the real bearer on the way to the server (which answers 401 without it). The scripted
model calls the server's `add` tool: the result comes back, and the canary is in no file the agent
could dump (env, `/proc`, the CLI's home and MCP config) nor in the events or logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from tests.fakes.mcp_servers import HttpMcpServer
from tests.security.keys_rig import *  # noqa: F403 - the fixtures
from tests.security.keys_rig import KeysApp
from tests.security.test_keys_canary import DUMP, _files_holding

pytestmark = [pytest.mark.docker, pytest.mark.slow]
CAGE = [sys.executable, "-m", "orchestrator.cli"]


def test_an_http_mcp_token_never_enters_the_container(
    keys_app: KeysApp, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    mcp_token = "mcptkn" + os.urandom(10).hex()
    (tmp_path / "calc").mkdir()
    with HttpMcpServer(tmp_path / "calc", token=mcp_token) as calc:
        (keys_app.root / "mcps").mkdir(parents=True)
        (keys_app.root / "mcps" / "calc.mcp.yao").write_text(
            json.dumps(
                {
                    "name": "calc",
                    "transport": "http",
                    "url": calc.url,
                    "authorization_token": "$ENV.CALC_TOKEN",
                }
            )
        )
        keys_app.server.add_scenario(
            "mcp",
            [
                {"tool": "mcp__calc__add", "args": {"a": 2, "b": 40}},
                {"shell": DUMP},
                {"text": "the sum is in"},
            ],
        )
        assistant = keys_app.assistant("claude", "mcp", name="mcp", lifecycle="oneshot")
        package = keys_app.root / "assistants" / "keys" / "mcp" / "package.yao"
        package.write_text(json.dumps({**json.loads(package.read_text()), "mcp": {"servers": ["calc"]}}))
        workspace = tmp_path / "ws"
        workspace.mkdir()
        (workspace / "release").touch()  # the dump need not wait here
        for item in (workspace, workspace / "release"):
            os.chown(item, 1000, 1000)
        proc = subprocess.run(
            [*CAGE, "run", assistant, "--workspace", str(workspace), "--prompt", "add", "--output", "jsonl"],
            env={**keys_app.env(), "CALC_TOKEN": mcp_token},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        calls = (tmp_path / "calc" / "calls.log").read_text()
    tool, _, args = calls.splitlines()[0].partition(" ")
    assert (tool, json.loads(args)) == ("add", {"a": 2, "b": 40})  # the server got the call, with its bearer
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    outputs = [
        e["props"].get("output") for e in events if e["type"] == "execute" and e["props"].get("output")
    ]
    assert any("42" in str(o) for o in outputs), outputs
    assert "cage-gw-" in (workspace / "dump" / "proc.txt").read_text()
    assert _files_holding(workspace, mcp_token) == []
    assert mcp_token not in proc.stdout + proc.stderr
