"""The reaper stops a box with its sandbox's `stop_timeout` (not a fixed grace), also after a
restart (the grace is a label, read back when reconcile adopts the box)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.sandbox.backend import SandboxRef
from orchestrator.sandbox.manager import STOP_GRACE, SandboxManager, SandboxRequest
from orchestrator.sandbox.reaper import ReapAction, Reaper
from orchestrator.sandbox.reconcile import reconcile
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder


class StopRecorder(FakeBackend):
    """The fake backend, keeping the grace each stop was given."""

    def __init__(self) -> None:
        super().__init__()
        self.stops: list[tuple[str, float]] = []

    async def stop(self, ref: SandboxRef, *, timeout: float = 2.0) -> None:  # noqa: ASYNC109 - protocol
        self.stops.append((ref.name, timeout))
        await super().stop(ref, timeout=timeout)


def _request(tmp_path: Path, **kw: object) -> SandboxRequest:
    spec = SandboxSpec.model_validate(
        {
            "version": "2.0",
            "runner": {"name": "claude"},
            "lifecycle": "longrunning",
            "idle_timeout": "5s",
            **kw,
        }
    )
    return SandboxRequest(owner="o", assistant_id="a", assistant_dir=tmp_path, spec=spec)


async def test_the_reaper_stops_with_the_sandboxs_stop_timeout(tmp_path: Path) -> None:
    now = [0.0]
    backend = StopRecorder()
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(), clock=lambda: now[0])
    lease = await manager.acquire(_request(tmp_path, stop_timeout="45s"))
    assert backend.boxes[lease.ref.id].spec.stop_timeout == 45  # the engine's own stop uses it too
    await manager.release(lease)
    now[0] = 6.0
    assert await Reaper(manager).sweep() == [(lease.ref.name, ReapAction.STOP)]
    assert backend.stops == [(lease.ref.name, 45.0)]


async def test_an_adopted_box_keeps_its_stop_timeout(tmp_path: Path) -> None:
    backend = StopRecorder()
    first = SandboxManager(backend, FakeImageBuilder(), Settings())
    lease = await first.acquire(_request(tmp_path, stop_timeout="7s"))
    await first.release(lease)
    now = [1000.0]
    restarted = SandboxManager(backend, FakeImageBuilder(), Settings(), clock=lambda: now[0])
    report = await reconcile(restarted, lambda assistant: True)
    assert report.adopted == (lease.ref.name,)
    box = restarted.registry.get(lease.ref.name)
    assert box is not None and box.stop_timeout == 7.0
    now[0] += 6.0
    assert await Reaper(restarted).sweep() == [(lease.ref.name, ReapAction.STOP)]
    assert backend.stops == [(lease.ref.name, 7.0)]


async def test_the_default_grace_is_yaos(tmp_path: Path) -> None:
    backend = StopRecorder()
    manager = SandboxManager(backend, FakeImageBuilder(), Settings())
    lease = await manager.acquire(_request(tmp_path))
    box = manager.registry.get(lease.ref.name)
    assert box is not None and box.stop_timeout == STOP_GRACE
    await manager.release(lease)
