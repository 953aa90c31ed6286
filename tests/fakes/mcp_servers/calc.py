"""`calc`: a small MCP server for the LLM-mode tests, built with the official SDK (`MCPServer`).

Tools: `add` (a + b), `flaky` (fails `fails` times per `key`, then answers; the count lives in a
file under the state directory, so it survives reconnects), `fail` (always fails), `slow`
(sleeps), `greet` (reads `CALC_GREETING` from its environment) and `image` (a non-text result).
Every call is appended to `<state>/calls.log` as `<tool> <json args>`, so tests can count the
attempts the server really saw; a stdio server appends its pid to `<state>/pids` when it starts,
so tests can check that it was stopped.

Run over stdio: `python -m tests.fakes.mcp_servers.calc <state-dir>` (or the file path).
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

# A 1x1 transparent PNG.
_PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def build(state_dir: Path) -> MCPServer:
    """The server; `state_dir` holds the call log and the `flaky` counters."""
    app = MCPServer("calc", log_level="WARNING")

    def record(tool: str, args: dict[str, object]) -> None:
        with (state_dir / "calls.log").open("a", encoding="utf-8") as log:
            log.write(f"{tool} {json.dumps(args, sort_keys=True)}\n")

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        record("add", {"a": a, "b": b})
        return a + b

    @app.tool()
    def flaky(key: str, fails: int = 2, attempt: int = 0) -> str:
        """Fails `fails` times for `key`, then succeeds. `attempt` is informational."""
        record("flaky", {"key": key, "fails": fails, "attempt": attempt})
        counter = state_dir / f"flaky-{key}.count"
        count = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(count))
        if count <= fails:
            raise ToolError(f"flaky failure {count} of {fails}")
        return f"flaky ok after {count - 1} failures"

    @app.tool()
    def fail(reason: str = "", attempt: int = 0) -> str:
        """Always fails."""
        record("fail", {"reason": reason, "attempt": attempt})
        raise ToolError(f"the backend is down ({reason or 'no reason'})")

    @app.tool()
    async def slow(seconds: float) -> str:
        """Sleeps `seconds`, then answers."""
        record("slow", {"seconds": seconds})
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @app.tool()
    def greet(name: str) -> str:
        """A greeting built from the server's `CALC_GREETING` environment variable."""
        record("greet", {"name": name})
        return f"{os.environ.get('CALC_GREETING', 'hello')}, {name}"

    @app.tool()
    def image() -> Image:
        """A one-pixel PNG."""
        record("image", {})
        return Image(data=_PIXEL, format="png")

    return app


def main() -> None:
    state = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    state.mkdir(parents=True, exist_ok=True)
    with (state / "pids").open("a", encoding="utf-8") as pids:
        pids.write(f"{os.getpid()}\n")
    build(state).run()


if __name__ == "__main__":
    main()
