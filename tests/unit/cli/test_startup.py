"""The CLI's start-up path imports no model SDK, MCP, SQLAlchemy or web framework (issue 14).

Each case runs in a fresh interpreter and reports which of the heavy packages ended up in
`sys.modules`; `bench/cli.py` measures what that buys in seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SDKS = ("anthropic", "openai", "mcp", "httpx2")
SERVER = ("sqlalchemy", "alembic", "fastapi", "starlette", "uvicorn", "docker")

PROBE = """
import json, sys
from orchestrator.cli.app import main
try:
    main({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported_by(argv: list[str]) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    modules: list[str] = json.loads(result.stderr.strip().splitlines()[-1])
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize(
    "argv", [["--help"], ["validate"], ["assistants", "--json"], ["--version"]], ids=" ".join
)
def test_cli_start_up_imports_nothing_heavy(argv: list[str]) -> None:
    heavy = imported_by(argv) & {*SDKS, *SERVER}
    assert not heavy, f"`cage {' '.join(argv)}` imported {sorted(heavy)}"


def test_root_help_does_not_even_load_pydantic_or_rich() -> None:
    assert not imported_by(["--help"]) & {"pydantic", "rich", "structlog", "yaml"}


def test_a_runner_turn_loads_no_model_sdk_and_no_mcp() -> None:
    """`cage run` of a claude/codex/opencode turn: the pipeline is loaded, the LLM-mode stack is not."""
    probe = (
        "import json, sys; import orchestrator.cli.run, orchestrator.pipeline.modes;"
        "print(json.dumps(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    loaded = {m.split(".")[0] for m in json.loads(result.stdout)}
    assert "orchestrator" in loaded
    assert not loaded & set(SDKS), sorted(loaded & set(SDKS))


def test_each_sdk_loads_with_its_own_connector_only() -> None:
    probe = (
        "import json, sys; from orchestrator.llm import client_for, ClientSettings;"
        "client_for(ClientSettings(provider='openai', model='m', key='k', base_url='http://127.0.0.1:9'));"
        "print(json.dumps(['anthropic' in sys.modules, 'openai' in sys.modules]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [False, True]
