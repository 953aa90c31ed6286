"""The shipped `examples.yaocode` web fetch tool really works: its stdio MCP server
(`assistants/examples/yaocode/mcp/webfetch.py`, started by `mcps/webfetch.mcp.yao` after the
`prepare` step copied it into the box) is offered to the model and fetches a page inside the
sandbox, reduced to its text. The example's own files are used as they ship; only the connector is
the fake model server's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.dsl.jsonc import parse_jsonc
from tests.fakes.model_server import FakeModelServer
from tests.integration.native.conftest import NativeApp
from tests.integration.runners.conftest import cage_run, own

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[3] / "assistants" / "examples" / "yaocode"
TOOL = "agents_native_yaocode_webfetch__fetch"
PAGE = "<html><head><script>var hidden = 1;</script></head><body><p>Cage &amp; webfetch</p></body></html>"
SERVE = (
    "cd site && (setsid nohup python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &) "
    "&& for i in $(seq 50); do python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8765))\" "
    "2>/dev/null && break; sleep 0.2; done; echo up"
)


def test_the_example_fetch_tool_fetches_a_page_in_the_sandbox(
    app: NativeApp, native_server: FakeModelServer, tmp_path: Path
) -> None:
    scenario = "example-webfetch"
    native_server.add_scenario(
        scenario,
        [
            {"shell": SERVE},
            {"tool": TOOL, "args": {"url": "http://127.0.0.1:8765/page.html"}},
            {"tool": TOOL, "args": {"url": "file:///etc/passwd"}},
            {"text": "fetched"},
        ],
    )
    aid = app.assistant("yaocode", scenario=scenario)
    adir = app.root / "assistants" / "native" / "yaocode"
    shutil.copytree(EXAMPLE / "mcp", adir / "mcp")
    shutil.copytree(EXAMPLE / "mcps", adir / "mcps")
    example = parse_jsonc((EXAMPLE / "sandbox.yao").read_text(), file="sandbox.yao").value
    sandbox = json.loads((adir / "sandbox.yao").read_text())
    sandbox["prepare"] = example["prepare"]
    (adir / "sandbox.yao").write_text(json.dumps(sandbox))
    package = json.loads((adir / "package.yao").read_text())
    package["mcp"] = {"servers": [{"server_id": "agents.native.yaocode.webfetch", "tools": ["fetch"]}]}
    (adir / "package.yao").write_text(json.dumps(package))
    ws = tmp_path / "ws"
    (ws / "site").mkdir(parents=True)
    (ws / "site" / "page.html").write_text(PAGE)
    result = cage_run(app, aid, own(ws), "fetch the page", timeout=900)
    assert result.code == 0, result.stderr[-3000:]
    first = native_server.requests.for_scenario(scenario)[0].body
    assert TOOL in {t["name"] for t in first["tools"]}
    fetched = [
        e["props"] for e in result.of("execute") if e["props"].get("tool") == TOOL and "output" in e["props"]
    ]
    assert len(fetched) == 2, fetched
    assert fetched[0]["output"] == "Cage & webfetch"  # the page's text: no tags, no script
    assert "only http and https" in fetched[1]["output"]  # the server's own refusal, from inside the box
