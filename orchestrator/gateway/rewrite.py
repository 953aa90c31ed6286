"""Connectors and MCP servers as a sandbox sees them, and the upstreams the gateway keeps.

`sandbox_connector` is the connector a runner is given: the same model and options, the turn's
gateway token as its key, no extra headers, and a base URL under the gateway that keeps the
real URL's path (so each CLI's own path rules give the same request as against the real host).
`model_upstream` is what stays outside: the real origin and the credential headers to add.
HTTP MCP servers go the same way; stdio ones run inside the sandbox and are left as they are.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, ConnectorType, McpServerSpec
from orchestrator.gateway.forwarding import TOKEN_HEADER
from orchestrator.gateway.grants import Upstream, UpstreamKind


def _split(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")


def route_url(root: str, kind: UpstreamKind, upstream_id: str, path: str) -> str:
    return f"{root.rstrip('/')}/{kind}/{quote(upstream_id, safe='')}{path}"


def credential_headers(connector: ConnectorSpec) -> dict[str, str]:
    """The headers that carry the connector's credentials (key and custom headers)."""
    headers: dict[str, str] = {}
    key = connector.key.get_secret_value()
    if key:
        if connector.type == ConnectorType.ANTHROPIC:
            headers["x-api-key"] = key
        elif connector.azure:
            headers["api-key"] = key
        else:
            headers["authorization"] = f"Bearer {key}"
    headers.update({name.lower(): value.get_secret_value() for name, value in connector.headers.items()})
    return headers


def model_upstream(connector: ConnectorSpec) -> Upstream:
    origin, path = _split(connector.base_url)
    return Upstream("model", connector.id, origin, path, credential_headers(connector))


def sandbox_connector(connector: ConnectorSpec, token: str, root: str) -> ConnectorSpec:
    """The connector with the token for its key, no headers, and the gateway's URL."""
    _, path = _split(connector.base_url)
    if not path and connector.type == ConnectorType.OPENAI:
        path = "/v1"  # what every OpenAI client appends to a bare host; kept explicit under the prefix
    url = route_url(root, "model", connector.id, path)
    return connector.model_copy(update={"key": SecretStr(token), "headers": {}, "base_url": url})


def proxied(server: McpServerSpec) -> bool:
    """HTTP MCP servers go through the gateway; stdio ones run in the sandbox, `sse` ones (whose
    message endpoint is a path the server names at run time) are passed as they are."""
    return server.transport == "http" and bool(server.url)


def mcp_upstream(server: McpServerSpec) -> Upstream:
    origin, path = _split(server.url)
    return Upstream("mcp", server.id, origin, path, {k.lower(): v for k, v in server.headers.items()})


def sandbox_mcp_server(server: McpServerSpec, token: str, root: str) -> McpServerSpec:
    """The server at the gateway's URL, with only the token as a header."""
    parts = urlsplit(server.url)
    url = route_url(root, "mcp", server.id, parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return server.model_copy(update={"url": url, "headers": {TOKEN_HEADER: token}})
