"""`cage init DIR`: an application directory to start from, one assistant per mode.

The scaffold is the smallest app that validates and runs: `agent.yml`, one connector (its key read
from the environment, never written), and three assistants under `assistants/app/`:

* `app.chat`, LLM mode: prompts only, the model answers;
* `app.coder`, runner mode: a coding agent CLI in a sandbox (claude for Anthropic, codex for
  OpenAI-compatible providers);
* `app.echo`, hook mode: a Python `create` hook answers without any model.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.appdir import APP_MARKERS
from orchestrator.errors import UsageError


class Provider(StrEnum):
    anthropic = "anthropic"
    openai = "openai"


KEY_ENV = {Provider.anthropic: "ANTHROPIC_API_KEY", Provider.openai: "OPENAI_API_KEY"}
DEFAULT_MODEL = {Provider.anthropic: "claude-sonnet-4-5", Provider.openai: "gpt-5.5"}
DEFAULT_HOST = {Provider.anthropic: "https://api.anthropic.com", Provider.openai: "https://api.openai.com"}
RUNNER = {Provider.anthropic: "claude", Provider.openai: "codex"}

AGENT_YML = """\
# Global defaults of this application directory; an assistant's own fields win.
uses:
  default: main          # the connector of assistants that name none (connectors/main.conn.yao)
roles:
  default: main          # "connector": "use::default" in a package.yao resolves here
runner: {runner}         # the runner of a sandbox.yao without runner.name
"""

ECHO_HOOK = '''\
"""Hook mode: `create` answers the user itself, no model involved (see docs/assistants.md)."""

from __future__ import annotations

from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    """Echo the last user message back."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    text = str(last.get("content", "")) if last else ""
    await ctx.send({"type": "text", "props": {"content": f"echo: {text}"}})
    return {}
'''

GITIGNORE = ".cage/\n"


def _json(value: object) -> str:
    return json.dumps(value, indent=2) + "\n"


def scaffold(provider: Provider, model: str, host: str) -> dict[str, str]:
    """The files of a new app directory, by relative path."""
    runner = RUNNER[provider]
    return {
        "agent.yml": AGENT_YML.format(runner=runner),
        ".gitignore": GITIGNORE,
        "connectors/main.conn.yao": _json(
            {
                "label": f"{provider.value} ({model})",
                "type": provider.value,
                "options": {"model": model, "key": f"$ENV.{KEY_ENV[provider]}", "host": host},
            }
        ),
        "assistants/app/chat/package.yao": _json(
            {"name": "Chat", "description": "LLM mode: the model answers.", "connector": "use::default"}
        ),
        "assistants/app/chat/prompts.yml": (
            "- role: system\n  content: You are a friendly, precise assistant. Answer briefly.\n"
        ),
        "assistants/app/coder/package.yao": _json(
            {"name": "Coder", "description": f"Runner mode: {runner} in a sandbox.", "connector": "main"}
        ),
        "assistants/app/coder/prompts.yml": "- role: system\n  content: You are a careful coding agent.\n",
        "assistants/app/coder/sandbox.yao": _json(
            {
                "version": "2.0",
                "runner": {"name": runner},
                "lifecycle": "oneshot",
                "computer": {"memory": "2GB", "cpus": 2},
                "turn_timeout": "20m",
            }
        ),
        "assistants/app/echo/package.yao": _json(
            {"name": "Echo", "description": "Hook mode: a Python hook answers, no model."}
        ),
        "assistants/app/echo/src/index.py": ECHO_HOOK,
    }


def init(
    directory: Annotated[Path, typer.Argument(help="The new application directory.")] = Path(),
    provider: Annotated[
        Provider, typer.Option("--provider", help="anthropic or openai (any OpenAI-compatible server).")
    ] = Provider.anthropic,
    model: Annotated[str | None, typer.Option("--model", help="Model name (default per provider).")] = None,
    host: Annotated[
        str | None, typer.Option("--host", help="API root, e.g. http://127.0.0.1:9000 for a local server.")
    ] = None,
) -> None:
    """Create an application directory: agent.yml, a connector and one assistant per mode."""
    target = directory.expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise UsageError(f"{directory}: exists and is not a directory")
    taken = [m for m in APP_MARKERS if (target / m).exists()]
    if taken:
        raise UsageError(f"{target} already holds {', '.join(taken)}: pick a new or empty directory")
    api_root = host or DEFAULT_HOST[provider]
    if not api_root.startswith(("http://", "https://")):
        raise UsageError(f"--host {host}: must start with http:// or https://")
    for relative, text in scaffold(provider, model or DEFAULT_MODEL[provider], api_root).items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    key = KEY_ENV[provider]
    typer.echo(f"created {target}: assistants app.chat (llm), app.coder (runner), app.echo (hook)")
    typer.echo(f"next: export {key}=...   then   cage --app {target} validate", err=True)
