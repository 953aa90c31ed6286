"""A tiny MCP stdio server for the codex golden recordings: one tool, `echo`, that returns its
text and `$ECHO_SUFFIX` (to show that codex passed the server its env).

Standard library only (it runs with the runner image's `python3`). Newline-delimited JSON-RPC 2.0.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

_TOOL = {
    "name": "echo",
    "description": "Return the given text unchanged.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What to echo."}},
        "required": ["text"],
    },
}


def _answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "echo", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": [_TOOL]}
    elif method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        suffix = os.environ.get("ECHO_SUFFIX", "")
        reply = f"echo: {text} {suffix}".rstrip()
        result = {"content": [{"type": "text", "text": reply}], "isError": False}
    elif method == "ping":
        result = {}
    elif "id" not in request:
        return None  # a notification
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "unknown method"}}
    return {"jsonrpc": "2.0", "id": request.get("id"), "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = _answer(json.loads(line))
        if answer is not None and "id" in answer:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
