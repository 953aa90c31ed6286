"""A minimal stdio MCP server for the `mcp` golden: one tool, `report`, echoing its message.

It says whether `ECHO_TOKEN` reached it (never the value), which proves that the `${VAR}`
placeholders of the generated `--mcp-config` were expanded from the exec env.
"""

import json
import os
import sys


def reply(request_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


TOOL = {
    "name": "report",
    "description": "Report a message to the orchestrator.",
    "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
}

for raw in sys.stdin:
    request = json.loads(raw)
    method, request_id = request.get("method"), request.get("id")
    if request_id is None:
        continue
    if method == "initialize":
        version = request.get("params", {}).get("protocolVersion", "2025-06-18")
        reply(
            request_id,
            {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "echo", "version": "1"},
            },
        )
    elif method == "tools/list":
        reply(request_id, {"tools": [TOOL]})
    elif method == "tools/call":
        message = request.get("params", {}).get("arguments", {}).get("message", "")
        token = "set" if os.environ.get("ECHO_TOKEN") == "mcp-golden-secret-42" else "missing"
        reply(request_id, {"content": [{"type": "text", "text": f"reported: {message} (token {token})"}]})
    else:
        sys.stdout.write(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": method}})
            + "\n"
        )
        sys.stdout.flush()
