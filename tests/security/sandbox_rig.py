"""Fixtures for the sandbox-boundary attacks: a real Docker engine, a manager, exec helpers.

Imported by `tests/security/test_sandbox_*.py` (the integration fixtures `docker_engine`,
`test_run_labels` and `sandbox_image` come from `tests/integration/conftest.py`). Everything is
labelled with this session's test-run id and one id per test, and removed afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import docker
import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest
from orchestrator.settings import Settings
from tests.integration.conftest import docker_engine, sandbox_image, test_run_labels
from tests.unit.sandbox.fakes import FakeImageBuilder

__all__ = [
    "case_labels",
    "docker_engine",
    "make_manager",
    "request",
    "sandbox_image",
    "sh",
    "spec",
    "test_run_labels",
]


def spec(**kw: Any) -> SandboxSpec:
    return SandboxSpec.model_validate({"version": "2.0", "runner": {"name": "claude"}, **kw})


def request(tmp_path: Path, sandbox: SandboxSpec, **kw: Any) -> SandboxRequest:
    owner = kw.pop("owner", f"o{uuid.uuid4().hex[:8]}")
    return SandboxRequest(owner=owner, assistant_id="tests.echo", assistant_dir=tmp_path, spec=sandbox, **kw)


async def sh(manager: SandboxManager, lease: SandboxLease, script: str) -> tuple[list[bytes], int, bytes]:
    """Run `script` as the sandbox user: stdout lines, exit code, stderr."""
    async with await manager.exec(lease, ExecSpec(argv=("sh", "-c", script))) as handle:
        lines = [item for item in [i async for i in handle] if isinstance(item, bytes)]
        return lines, await handle.wait(), handle.stderr


@pytest.fixture
def case_labels(test_run_labels: dict[str, str]) -> dict[str, str]:
    return {**test_run_labels, "cage.test-case": uuid.uuid4().hex[:12]}


@pytest.fixture
async def make_manager(
    docker_engine: docker.DockerClient, sandbox_image: str, tmp_path: Path, case_labels: dict[str, str]
) -> AsyncIterator[Any]:
    """`make_manager(**settings)`: managers on the real engine; their boxes and volumes go afterwards."""
    made: list[SandboxManager] = []

    def make(**overrides: Any) -> SandboxManager:
        settings = Settings(
            data_dir=tmp_path / "cage",
            reaper_interval=0.2,
            max_sandboxes=50,
            max_sandboxes_per_owner=20,
            **overrides,
        )
        manager = SandboxManager(
            DockerBackend(settings), FakeImageBuilder(tag=sandbox_image), settings, extra_labels=case_labels
        )
        made.append(manager)
        return manager

    yield make
    filters = {"label": [f"{k}={v}" for k, v in case_labels.items()]}
    for container in docker_engine.containers.list(all=True, filters=filters):
        container.remove(force=True)
    for volume in docker_engine.volumes.list(filters=filters):
        volume.remove(force=True)
