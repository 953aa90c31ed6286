"""H6: the `team` memory space comes from the caller's team membership, never from the request.

A real server running the real pipeline with the `hooks.memory` assistant; bob names alice's
team in `metadata.team_id` (and her owner name, the old default team space) and gets nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.api import create_app
from orchestrator.settings import Settings
from orchestrator.store import Store
from tests.fakes.assistants import make_app
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys, pipeline_services


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ServerThread, dict[str, str]]]:
    settings = Settings(
        app_dir=make_app(tmp_path / "app"), data_dir=tmp_path / "data", bootstrap_admin_key=BOOTSTRAP_KEY
    )
    keys = create_keys(
        settings, {"admin": ("admin", "ops"), "alice": ("user", "alice"), "bob": ("user", "bob")}
    )
    served = ServerThread(create_app(settings, services=pipeline_services())).start()
    try:
        yield served, keys
    finally:
        served.stop()


def memory_turn(url: str, key: str, ops: list[dict[str, Any]], metadata: dict[str, str]) -> httpx.Response:
    body = {
        "model": "hooks.memory",
        "messages": [{"role": "user", "content": json.dumps(ops)}],
        "metadata": metadata,
    }
    return httpx.post(
        f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def answer(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return json.loads(response.json()["choices"][0]["message"]["content"])


def test_a_second_owner_naming_anothers_team_gets_nothing(
    server: tuple[ServerThread, dict[str, str]],
) -> None:
    served, keys = server
    url = served.base_url
    admin = {"Authorization": f"Bearer {keys['admin']}"}
    added = httpx.put(f"{url}/v1/admin/teams/red/members/alice", headers=admin)
    assert added.status_code == 200 and added.json() == {"team": "red", "members": ["alice"]}

    secret = [{"op": "set", "space": "team", "key": "plan", "value": "launch at dawn"}]
    answer(memory_turn(url, keys["alice"], secret, {}))
    read = [{"op": "get", "space": "team", "key": "plan"}]
    assert answer(memory_turn(url, keys["alice"], read, {})) == ["launch at dawn"]

    claimed = memory_turn(url, keys["bob"], read, {"team_id": "red"})
    assert claimed.status_code == 403
    assert "not a member of team 'red'" in claimed.json()["error"]["message"]
    as_owner = memory_turn(url, keys["bob"], read, {"team_id": "alice"})  # the old fallback space
    assert as_owner.status_code == 403
    assert answer(memory_turn(url, keys["bob"], read, {})) == [None]  # bob's own team space is empty

    # the host's state: the value sits in red's space only, and bob wrote nothing anywhere
    async def spaces() -> list[tuple[str, list[str]]]:
        store: Store = served.app.state.api.services.store
        return [(s, await store.memory.keys("team", s)) for s in ("red", "alice", "owner:bob", "owner:alice")]

    assert served.call(spaces()) == [("red", ["plan"]), ("alice", []), ("owner:bob", []), ("owner:alice", [])]

    # once an admin adds bob to red, he shares its space
    httpx.put(f"{url}/v1/admin/teams/red/members/bob", headers=admin)
    assert answer(memory_turn(url, keys["bob"], read, {})) == ["launch at dawn"]
    gone = httpx.delete(f"{url}/v1/admin/teams/red/members/bob", headers=admin)
    assert gone.json()["members"] == ["alice"]
    assert answer(memory_turn(url, keys["bob"], read, {})) == [None]
    user_try = httpx.put(
        f"{url}/v1/admin/teams/red/members/bob", headers={"Authorization": f"Bearer {keys['bob']}"}
    )
    assert user_try.status_code == 403
