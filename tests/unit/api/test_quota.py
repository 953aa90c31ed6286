"""Turns starting at the same moment past the sandbox cap are refused up front (429), not started
and then failed inside the turn: a passing check reserves its sandbox until the turn ends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.dsl import AppLoader
from orchestrator.errors import CapacityError
from orchestrator.sandbox import SandboxManager
from tests.unit.api.conftest import make_settings
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder


def test_concurrent_starts_reserve_their_sandboxes(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, max_sandboxes_per_owner=2)
    spec = AppLoader(settings.app_dir, environ={}).get("tests.box").sandbox
    manager = SandboxManager(FakeBackend(), FakeImageBuilder(), settings)

    def start(session: str, owner: str = "alice") -> Callable[[], None]:
        return manager.admission.admit(
            spec, owner=owner, assistant_id="tests.box", session_id=session, workspace_id=None
        )

    first, _second = start("c1"), start("c2")  # neither box exists yet: both reserve
    with pytest.raises(CapacityError, match="owner alice"):
        start("c3")  # refused before it starts, although no box exists yet
    start("c1")  # the same session's box is already reserved: no second one, so no refusal
    start("c9", owner="bob")  # another owner has its own room
    first()  # the turn ended (its box was never made, or is counted by the registry)
    start("c3")
