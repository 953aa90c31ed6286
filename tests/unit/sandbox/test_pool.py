"""Pure parts of the warm pool: which requests pool, what a key covers, what the reaper leaves to it."""

from __future__ import annotations

from orchestrator.dsl.sandbox import Lifecycle, SandboxSpec
from orchestrator.sandbox.backend import SandboxRef
from orchestrator.sandbox.pool import PoolKey, pool_size
from orchestrator.sandbox.reaper import decide
from orchestrator.sandbox.registry import TrackedSandbox
from orchestrator.settings import Settings


def _spec(**kw: object) -> SandboxSpec:
    return SandboxSpec.model_validate({"version": "2.0", "runner": {"name": "claude"}, **kw})


def _key(**kw: object) -> PoolKey:
    base: dict[str, object] = {
        "owner": "alice",
        "assistant_id": "a.b",
        "workspace_id": "default",
        "shared_workspace": False,
        "config_hash": "h1",
    }
    return PoolKey.model_validate({**base, **kw})


def test_the_spec_size_wins_over_the_setting_and_only_oneshot_pools() -> None:
    settings = Settings(pool_size=2)
    assert pool_size(_spec(), settings) == 2
    assert pool_size(_spec(pool={"size": 0}), settings) == 0
    assert pool_size(_spec(pool={"size": 5}), settings) == 5
    assert pool_size(_spec(lifecycle="session"), settings) == 0
    assert pool_size(_spec(), Settings()) == 0  # off unless asked for


def test_a_key_is_one_owner_assistant_workspace_and_config_hash() -> None:
    digests = {
        _key().digest,
        _key(owner="bob").digest,
        _key(assistant_id="a.c").digest,
        _key(workspace_id="shared1", shared_workspace=True).digest,
        _key(shared_workspace=True).digest,
        _key(config_hash="h2").digest,
    }
    assert len(digests) == 6
    assert _key().digest == _key().digest
    assert _key().scope == _key(config_hash="h2").scope


def test_the_reaper_leaves_unclaimed_pooled_boxes_to_the_pool() -> None:
    box = TrackedSandbox(
        ref=SandboxRef(id="x", name="cage-x"),
        owner="alice",
        assistant_id="a.b",
        lifecycle=Lifecycle.ONESHOT,
        config_hash="h1",
        idle_timeout=1.0,
        max_lifetime=None,
        created_at=0.0,
        last_used=0.0,
        pool_key=_key().digest,
    )
    assert decide(box, 10_000.0) is None
    box.pool_key = None  # claimed: an idle oneshot box like any other
    assert decide(box, 10_000.0) is not None
