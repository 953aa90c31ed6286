"""`webfetch`: a stdio MCP server with one tool, `fetch(url, max_length=20000)`, in the standard
library only, so it runs in the yaocode runner's image (which has `python3` and no `uvx`).

`sandbox.yao` copies this file into the box (`prepare`), and `mcps/webfetch.mcp.yao` starts it
there: the server, and so every page it fetches, lives under the sandbox's network policy, never
on the orchestrator host. HTML is reduced to its text; other text types are returned as they are.
"""

from __future__ import annotations

import html
import json
import re
import sys
import urllib.request
from typing import Any

USER_AGENT = "cage-webfetch/1"
TOOL = {
    "name": "fetch",
    "description": "Fetch a web page (http or https) and return its text (HTML reduced to text).",
    "inputSchema": {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The page's URL."},
            "max_length": {"type": "integer", "description": "Characters to return (default 20000)."},
        },
        "required": ["url"],
    },
}
_DROP = re.compile(r"<(script|style|noscript)[^>]*>.*?</\1>", re.S | re.I)
_TAGS = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"[ \t\r\f\v]+")
_LINES = re.compile(r"\n\s*\n+")


def page_text(url: str, max_length: int) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError("only http and https URLs can be fetched")
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - the scheme is checked above
        kind = response.headers.get_content_type()
        charset = response.headers.get_content_charset() or "utf-8"
        body = response.read(5 * 2**20).decode(charset, errors="replace")
    if kind == "text/html":
        body = _TAGS.sub(" ", _DROP.sub(" ", body))
        body = _LINES.sub("\n\n", _SPACE.sub(" ", html.unescape(body))).strip()
    return body[:max_length]


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    ident, method = message.get("id"), message.get("method")
    if ident is None:
        return None
    if method == "initialize":
        version = message.get("params", {}).get("protocolVersion", "2025-06-18")
        result: dict[str, Any] = {"protocolVersion": version, "capabilities": {"tools": {}},
                                  "serverInfo": {"name": "webfetch", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        params = message.get("params", {})
        args = params.get("arguments") or {}
        try:
            if params.get("name") != "fetch":
                raise ValueError(f"no tool {params.get('name')!r}")
            text, error = page_text(str(args.get("url", "")), int(args.get("max_length") or 20000)), False
        except Exception as exc:  # noqa: BLE001 - any failure is the tool's error result
            text, error = f"{type(exc).__name__}: {exc}", True
        result = {"content": [{"type": "text", "text": text}], "isError": error}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            reply = answer(json.loads(line))
            if reply is not None:
                sys.stdout.write(json.dumps(reply) + "\n")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
