"""MCP servers written with the official `mcp` SDK for the LLM-mode tests.

* `calc.py` — tools `add`, `flaky`, `fail`, `slow`, `greet`, `image`; run over stdio as a script
  (`CALC_SCRIPT`), or built in-process with `build(state_dir)`.
* `HttpMcpServer` — the same server over streamable HTTP in a thread on 127.0.0.1, optionally
  behind a bearer token.
* `app.LlmApp` — an app directory (connectors on the fake model server, `mcps/`, assistants).
"""

from pathlib import Path

from tests.fakes.mcp_servers.http_server import HttpMcpServer

CALC_SCRIPT = Path(__file__).with_name("calc.py")
"""Run it as `python CALC_SCRIPT <state-dir>`: the stdio server."""

__all__ = ["CALC_SCRIPT", "HttpMcpServer"]
