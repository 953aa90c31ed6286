"""`egress_events` around a turn in an isolated box: denials become events while the turn runs, and
the turn's own error comes out as itself (a task group does not turn it into a crash)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.errors import SandboxNotFound
from orchestrator.pipeline.modes.egress_events import egress_events
from orchestrator.sandbox.egress.denials import EgressDenials
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest
from orchestrator.settings import Settings
from orchestrator.stream import CountingIds, Event, TurnBuilder
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder


async def _isolated(tmp_path: Path) -> tuple[SandboxManager, SandboxLease, EgressDenials]:
    backend = FakeBackend()
    hub = EgressDenials()
    backend.egress = SimpleNamespace(denials=hub)  # type: ignore[attr-defined]  # what DockerBackend has
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(data_dir=tmp_path))
    spec = SandboxSpec.model_validate({"version": "2.0", "runner": {"name": "claude"}})
    lease = await manager.acquire(
        SandboxRequest(owner="alice", assistant_id="tests.net", assistant_dir=tmp_path, spec=spec)
    )
    assert lease.isolated  # every box is, by default
    return manager, lease, hub


def _builder() -> TurnBuilder:
    builder = TurnBuilder(CountingIds(), runner="claude")
    builder.stream_start("tests.net")
    return builder


async def test_a_denial_while_the_turn_runs_is_an_event(tmp_path: Path) -> None:
    manager, lease, hub = await _isolated(tmp_path)
    hub.track(lease.identity.name, "10.213.0.16/28", "bridge")
    emitted: list[Event] = []

    async def emit(events: Sequence[Event]) -> None:
        emitted.extend(events)

    async with egress_events(manager, lease, _builder(), emit):
        line = "1 10.213.0.18 TCP_DENIED 403 CONNECT evil.example 443"
        await anyio.to_thread.run_sync(hub.feed, line)  # the follower feeds from a thread of its own
    [denied] = [e.props for e in emitted]
    assert (getattr(denied, "event", None), getattr(denied, "host", None)) == (
        "sandbox/egress_denied",
        "evil.example",
    )


async def test_the_turns_own_error_comes_out_unwrapped(tmp_path: Path) -> None:
    manager, lease, _ = await _isolated(tmp_path)

    async def emit(events: Sequence[Event]) -> None:
        raise AssertionError(f"nothing to emit: {events}")

    # the box went away under the turn: the pipeline reports that error, not "failed inside the
    # orchestrator" (it saw an ExceptionGroup instead)
    with pytest.raises(SandboxNotFound):
        async with egress_events(manager, lease, _builder(), emit):
            raise SandboxNotFound(lease.identity.name)
