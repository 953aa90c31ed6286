"""`LlmApp`: a small application directory for LLM-mode tests, wired to the fake model server.

Connectors: `main` (Anthropic Messages, model `fake@main`) for the assistants under test and
`fallback` (OpenAI Chat Completions, model `fake@fallback`), which `agent.yml` makes
`roles.default`, so the built-in `__yao.loop_fallback` (`use::default`) answers from the
`fallback` scenario. MCP servers are written as `mcps/*.mcp.yao`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.dsl import AppLoader
from tests.fakes.mcp_servers import CALC_SCRIPT

MODEL_KEY = "sk-ant-llm-turn-secret-0042"
SYSTEM_PROMPT = "You are Calc. Use the calc tools for arithmetic."


class LlmApp:
    def __init__(self, root: Path, model_url: str) -> None:
        self.root = root
        self.state = root.parent / "mcp-state"
        self.state.mkdir(parents=True, exist_ok=True)
        for name, kind in (("main", "anthropic"), ("fallback", "openai")):
            conn = {
                "label": name,
                "type": kind,
                "options": {"model": f"fake@{name}", "key": MODEL_KEY, "host": model_url},
            }
            self.write(f"connectors/{name}.conn.yao", json.dumps(conn))
        self.write("agent.yml", "roles:\n  default: fallback\n")

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def stdio_server(
        self,
        server_id: str = "calc",
        *,
        timeout: str = "10s",
        env: Mapping[str, str] | None = None,
        command: str | None = None,
        arguments: Sequence[str] | None = None,
    ) -> None:
        spec: dict[str, Any] = {
            "transport": "stdio",
            "command": command or sys.executable,
            "arguments": list(arguments) if arguments is not None else [str(CALC_SCRIPT), str(self.state)],
            "timeout": timeout,
        }
        if env:
            spec["env"] = dict(env)
        self.write(f"mcps/{server_id}.mcp.yao", json.dumps(spec))

    def http_server(self, server_id: str, url: str, *, token: str = "", timeout: str = "10s") -> None:
        spec = {"transport": "http", "url": url, "authorization_token": token, "timeout": timeout}
        self.write(f"mcps/{server_id}.mcp.yao", json.dumps(spec))

    def assistant(
        self,
        name: str = "calc",
        *,
        servers: Sequence[Any] = ("calc",),
        options: Mapping[str, Any] | None = None,
        prompts: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """Write `assistants/tests/<name>` and return its id `tests.<name>`."""
        package: dict[str, Any] = {"name": name.title(), "connector": "main", **(extra or {})}
        if servers:
            package["mcp"] = {"servers": list(servers), "options": dict(options or {})}
        self.write(f"assistants/tests/{name}/package.yao", json.dumps(package))
        system = prompts if prompts is not None else f"- role: system\n  content: {SYSTEM_PROMPT}\n"
        self.write(f"assistants/tests/{name}/prompts.yml", system)
        return f"tests.{name}"

    def loader(self, environ: Mapping[str, str] | None = None) -> AppLoader:
        return AppLoader(self.root, environ={"PATH": os.environ.get("PATH", ""), **(environ or {})})

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """The calls the calc server saw (all tools, or one), as their argument dicts."""
        log = self.state / "calls.log"
        if not log.exists():
            return []
        rows = [line.split(" ", 1) for line in log.read_text(encoding="utf-8").splitlines()]
        return [json.loads(args) for name, args in rows if tool is None or name == tool]

    def server_pids(self) -> list[int]:
        pids = self.state / "pids"
        return [int(p) for p in pids.read_text().split()] if pids.exists() else []
