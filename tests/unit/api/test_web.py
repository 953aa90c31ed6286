"""The session viewer's files are served by name with a strict content security policy, every
module the page imports ships with it, and the page's own origin may open a session websocket
while any other origin is refused."""

from __future__ import annotations

import json
import re

import httpx
from websockets.asyncio.client import connect

from orchestrator.api.routers.web import FILES, STATIC
from tests.unit.api.conftest import Served


def test_the_page_and_its_files_are_served_with_a_strict_policy(served: Served) -> None:
    root = httpx.get(served.url + "/", follow_redirects=False)
    page = httpx.get(served.url + "/ui/")
    script = httpx.get(served.url + "/ui/app.js")
    missing = httpx.get(served.url + "/ui/secret.py")
    escaped = httpx.get(served.url + "/ui/..%2Frouters%2Fweb.py")
    assert root.status_code == 307 and root.headers["location"] == "/ui/"
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert (
        "script-src 'self'" in policy
        and "default-src 'none'" in policy
        and "frame-ancestors 'none'" in policy
    )
    assert script.headers["content-type"].startswith("text/javascript")
    assert missing.status_code == 404 and escaped.status_code == 404


def test_every_file_the_page_names_ships_with_it() -> None:
    named: set[str] = set()
    for path in STATIC.iterdir():
        text = path.read_text()
        named |= set(re.findall(r'from "\./([\w.-]+)"', text))
        named |= set(re.findall(r'"/ui/([\w.-]+)"', text))
    assert named and named <= set(FILES), named - set(FILES)
    assert not any(
        "http://" in body.decode() or "https://" in body.decode() for body, _ in [FILES["index.html"]]
    )


async def test_the_pages_own_origin_may_open_a_session_socket(served: Served) -> None:
    def ticket() -> str:
        answer = httpx.post(served.url + "/v1/sessions/ws-ticket", headers=served.auth("alice"))
        return str(answer.json()["ticket"])

    url = f"{served.server.ws_url}/v1/sessions/web-1/ws?assistant_id=tests.echo"
    async with connect(f"{url}&ticket={ticket()}", origin=served.url) as same:  # type: ignore[arg-type]
        ready = json.loads(await same.recv())
    async with connect(f"{url}&ticket={ticket()}", origin="http://evil.example") as other:  # type: ignore[arg-type]
        refused = json.loads(await other.recv())
        await other.wait_closed()
    assert ready["type"] == "session.ready"
    assert refused["type"] == "session.error" and refused["code"] == "forbidden"
    assert other.close_code == 4403
