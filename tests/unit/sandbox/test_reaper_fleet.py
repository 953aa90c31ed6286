"""The leader's reaper over boxes other replicas use (`Reaper(fleet=...)`) and its adopt-only look
at the engine (`reconcile(adopt_only=True)`), on the FakeBackend with a fake clock."""

from __future__ import annotations

from pathlib import Path

from orchestrator.dsl.sandbox import Lifecycle, SandboxSpec
from orchestrator.sandbox.backend import CreateSpec
from orchestrator.sandbox.identity import identity_for
from orchestrator.sandbox.labels import sandbox_labels
from orchestrator.sandbox.manager import SandboxManager, SandboxRequest
from orchestrator.sandbox.reaper import FleetUse, ReapAction, Reaper
from orchestrator.sandbox.reconcile import reconcile
from orchestrator.sandbox.registry import TrackedSandbox
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder


def spec() -> SandboxSpec:
    return SandboxSpec.model_validate(
        {"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session", "idle_timeout": "2s"}
    )


async def test_a_box_another_replica_uses_is_spared_and_its_idle_clock_follows_that_use(
    tmp_path: Path,
) -> None:
    now = [0.0]
    backend = FakeBackend()
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(), clock=lambda: now[0])
    uses: dict[str, FleetUse] = {}
    asked: list[list[str]] = []

    async def fleet(boxes: list[TrackedSandbox]) -> dict[str, FleetUse]:
        asked.append([b.ref.name for b in boxes])
        return dict(uses)

    reaper = Reaper(manager, fleet=fleet)
    req = SandboxRequest(owner="o", assistant_id="a", assistant_dir=tmp_path, session_id="c", spec=spec())
    lease = await manager.acquire(req)
    await manager.release(lease)
    name = lease.ref.name

    now[0] = 100.0
    uses[name] = FleetUse(busy=True, idle_for=None)  # another replica's turn is in it
    assert await reaper.sweep() == []
    uses[name] = FleetUse(busy=False, idle_for=1.0)  # it used it a second ago
    assert await reaper.sweep() == []
    box = manager.registry.get(name)
    assert box is not None and box.last_used == 99.0
    now[0] = 101.5
    uses[name] = FleetUse(busy=False, idle_for=2.5)  # the same use, seen 2.5 s later: idle past 2 s
    assert await reaper.sweep() == [(name, ReapAction.REMOVE)]
    assert asked == [[name]] * 3
    assert backend.boxes == {}
    assert await reaper.sweep() == [] and len(asked) == 3  # nothing tracked: nothing to ask


async def test_adopt_only_adopts_reapable_boxes_and_never_removes(tmp_path: Path) -> None:
    backend = FakeBackend()
    extra = {"cage.test-run": "r1"}

    async def make(lifecycle: Lifecycle, assistant: str, session: str | None) -> str:
        ident = identity_for(
            lifecycle, owner="o", assistant_id=assistant, session_id=session, workspace_id=None
        )
        labels = sandbox_labels(ident, config_hash="h" * 64, idle_timeout=5.0, max_lifetime=None, extra=extra)
        return (await backend.create(CreateSpec(image="i", name=ident.name, labels=labels))).name

    kept = await make(Lifecycle.SESSION, "known", "c")
    running_oneshot = await make(Lifecycle.ONESHOT, "known", None)  # another replica's turn in it
    unknown = await make(Lifecycle.SESSION, "unknown", "c")
    await backend.create(
        CreateSpec(image="i", name="half", labels={**extra, "cage.managed": "true", "cage.sandbox": "half"})
    )
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(), extra_labels=extra)
    report = await reconcile(manager, lambda a: a == "known", adopt_only=True)
    assert report.adopted == (kept,) and report.removed == () and report.unclaimed == ()
    assert {b.ref.name for b in backend.boxes.values()} == {kept, running_oneshot, unknown, "half"}
    assert [b.ref.name for b in manager.registry.all()] == [kept]
    again = await reconcile(manager, lambda a: a == "known", adopt_only=True)
    assert again.adopted == ()  # tracked already
