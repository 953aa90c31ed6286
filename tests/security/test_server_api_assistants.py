"""M1: an admin key cannot make an API-created assistant's sandbox go past the server's policy
(memory, CPUs, pids, runtime, image, network, fixed host ports); each refusal names its key, and
nothing is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.api import ApiConfig, create_app
from tests.unit.api.conftest import make_settings
from tests.unit.api.harness import ServerThread, create_keys, fake_services

BASE: dict[str, Any] = {"version": "2.0", "runner": {"name": "tai"}, "lifecycle": "session"}


@pytest.mark.parametrize(
    ("computer", "key"),
    [
        ({"memory": "64GB"}, "sandbox.computer.memory"),
        ({"cpus": 64}, "sandbox.computer.cpus"),
        ({"pids": 1_000_000}, "sandbox.computer.pids"),
        ({"runtime": "runc-privileged"}, "sandbox.computer.runtime"),
        ({"image": "attacker/registry-pull:latest"}, "sandbox.computer.image"),
        ({"network": "bridge"}, "sandbox.computer.network"),
        ({"ports": [{"port": 8080, "host_port": 2222}]}, "sandbox.computer.ports"),
    ],
)
def test_api_assistants_are_held_to_the_servers_policy(
    tmp_path: Path, computer: dict[str, Any], key: str
) -> None:
    settings = make_settings(tmp_path)
    keys = create_keys(settings, {"admin": ("admin", "ops")})
    config = ApiConfig(api_assistant_networks=["none", "allowlist"])
    server = ServerThread(create_app(settings, services=fake_services(), config=config)).start()
    admin = {"Authorization": f"Bearer {keys['admin']}"}
    try:
        body = {"id": "api.greedy", "package": {"name": "greedy"}, "sandbox": {**BASE, "computer": computer}}
        refused = httpx.post(f"{server.base_url}/v1/admin/assistants", json=body, headers=admin)
        modest = {**body, "sandbox": {**BASE, "computer": {"memory": "1GB", "cpus": 1, "network": "none"}}}
        accepted = httpx.post(f"{server.base_url}/v1/admin/assistants", json=modest, headers=admin)
    finally:
        server.stop()
    assert refused.status_code == 422, refused.text
    assert key in refused.json()["detail"], refused.json()
    assert accepted.status_code == 201, accepted.text
