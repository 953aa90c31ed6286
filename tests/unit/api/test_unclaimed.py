"""M12: a restart with an assistant missing (a bad app mount) keeps that assistant's boxes and lists
them for the admin instead of removing them."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx

from orchestrator.api import create_app
from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.sandbox.backend import CreateSpec
from orchestrator.sandbox.identity import identity_for
from orchestrator.sandbox.labels import sandbox_labels
from tests.unit.api.conftest import make_settings
from tests.unit.api.harness import ServerThread, create_keys, fake_services
from tests.unit.sandbox.fakes import FakeBackend


def test_boxes_of_an_unknown_assistant_survive_a_restart_and_are_listed(tmp_path: Path) -> None:
    backend = FakeBackend()
    names = []
    for lifecycle, session in ((Lifecycle.PERSISTENT, None), (Lifecycle.SESSION, "c1")):
        ident = identity_for(
            lifecycle, owner="alice", assistant_id="gone.away", session_id=session, workspace_id=None
        )
        labels = sandbox_labels(ident, config_hash="h" * 64, idle_timeout=None, max_lifetime=None, extra={})
        anyio.run(backend.create, CreateSpec(image="i", name=ident.name, labels=labels))
        names.append(ident.name)
    settings = make_settings(tmp_path)
    keys = create_keys(settings, {"admin": ("admin", "ops"), "alice": ("user", "alice")})
    server = ServerThread(create_app(settings, services=fake_services(backend))).start()
    try:
        listed = httpx.get(
            f"{server.base_url}/v1/admin/sandboxes/unclaimed",
            headers={"Authorization": f"Bearer {keys['admin']}"},
        )
        refused = httpx.get(
            f"{server.base_url}/v1/admin/sandboxes/unclaimed",
            headers={"Authorization": f"Bearer {keys['alice']}"},
        )
    finally:
        server.stop()
    assert backend.removed == []  # nothing of the unknown assistant was removed
    assert {b.ref.name for b in backend.boxes.values()} == set(names)
    assert listed.status_code == 200
    assert sorted((u["name"], u["assistant_id"], u["reason"]) for u in listed.json()) == sorted(
        (n, "gone.away", "assistant unknown") for n in names
    )
    assert refused.status_code == 403
