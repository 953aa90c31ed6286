"""`bare`: a stdio MCP server in the standard library only, so it runs in any runner image with a
`python3` (the `tools` image of yaocode has no MCP SDK).

Tools: `whereami` (the host name, the pid, whether `/.dockerenv` exists and the first line of
`/proc/1/cmdline`: proof of where the server runs), `echo` (returns `text`) and `secret`
(returns a fixed string; tests leave it out of the allowlist and check it is never offered).
Every call is appended to `calls.log` in the directory given as the first argument (default:
the working directory).

Run: `python3 bare.py [state-dir]`. Newline-delimited JSON-RPC 2.0 on stdin/stdout.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

SECRET_ANSWER = "the secret tool ran"
TOOLS: list[dict[str, Any]] = [
    {
        "name": "whereami",
        "description": "Where this server runs.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "echo",
        "description": "Echo the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "secret",
        "description": "Never allowlisted.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


def _whereami() -> str:
    try:
        init = Path("/proc/1/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        init = ""
    return json.dumps(
        {
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "dockerenv": Path("/.dockerenv").exists(),
            "init": init,
        }
    )


def _call(name: str, args: dict[str, Any], state: Path) -> tuple[str, bool]:
    with (state / "calls.log").open("a", encoding="utf-8") as log:
        log.write(f"{name} {json.dumps(args, sort_keys=True)}\n")
    if name == "whereami":
        return _whereami(), False
    if name == "echo":
        return str(args.get("text", "")), False
    if name == "secret":
        return SECRET_ANSWER, False
    return f"no tool {name!r}", True


def _answer(message: dict[str, Any], state: Path) -> dict[str, Any] | None:
    method = message.get("method")
    ident = message.get("id")
    if ident is None:  # a notification
        return None
    if method == "initialize":
        version = message.get("params", {}).get("protocolVersion", "2025-06-18")
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bare", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        params = message.get("params", {})
        text, is_error = _call(str(params.get("name")), dict(params.get("arguments") or {}), state)
        result = {"content": [{"type": "text", "text": text}], "isError": is_error}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    state = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    state.mkdir(parents=True, exist_ok=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = _answer(json.loads(line), state)
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
