"""Prepare steps on the FakeBackend: file, copy, exec, once, ignore_error, path rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.errors import PrepareError, WorkspaceError
from orchestrator.sandbox.backend import ExecSpec, SandboxRef
from orchestrator.sandbox.manager import SandboxManager, SandboxRequest
from orchestrator.sandbox.workspace import host_source, relative_path
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder, FakeResult


def script(ref: SandboxRef, spec: ExecSpec) -> FakeResult:
    cmd = spec.argv[-1] if spec.argv[:2] == ("sh", "-c") else ""
    if "fail" in cmd:
        return FakeResult(exit_code=2, stderr=b"boom: token=abcdef123456 went wrong\n" + b"x" * 500)
    return FakeResult()


def user_cmds(backend: FakeBackend) -> list[str]:
    return [argv[2] for _, argv in backend.execs if argv[:2] == ("sh", "-c") and "realpath" not in argv[2]]


def req(tmp_path: Path, prepare: list[dict[str, Any]], **kw: Any) -> SandboxRequest:
    data: dict[str, Any] = {
        "version": "2.0",
        "runner": {"name": "claude"},
        "lifecycle": "session",
        "prepare": prepare,
    }
    data.update(kw)
    return SandboxRequest(
        owner="o",
        assistant_id="a.b",
        assistant_dir=tmp_path,
        session_id="c",
        spec=SandboxSpec.model_validate(data),
    )


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend(script)


@pytest.fixture
def manager(backend: FakeBackend) -> SandboxManager:
    return SandboxManager(backend, FakeImageBuilder(), Settings())


async def test_once_runs_once_per_config_hash(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    steps: list[dict[str, Any]] = [
        {"action": "exec", "cmd": "setup-once", "once": True},
        {"action": "exec", "cmd": "every-time"},
    ]
    lease = await manager.acquire(req(tmp_path, steps))
    await manager.release(lease)
    lease = await manager.acquire(req(tmp_path, steps))
    assert user_cmds(backend) == ["setup-once", "every-time", "every-time"]
    marker = await backend.get_file(lease.ref, "/workspace/.cage-state/prepare/a.b/done")
    assert marker.decode() == lease.config_hash
    await manager.release(lease)
    changed = await manager.acquire(req(tmp_path, steps, environment={"V": "2"}))
    assert user_cmds(backend)[-2:] == ["setup-once", "every-time"]
    assert changed.config_hash != lease.config_hash


async def test_file_and_copy_steps_write_into_the_workspace(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "a.md").write_text("A")
    (tmp_path / "tpl" / "sub").mkdir()
    (tmp_path / "tpl" / "sub" / "b.md").write_text("B")
    (tmp_path / "one.txt").write_text("one")
    steps: list[dict[str, Any]] = [
        {"action": "file", "path": "~/cfg/settings.json", "content": "{}"},
        {"action": "copy", "src": "tpl", "dst": "docs"},
        {"action": "copy", "src": "one.txt", "dst": "dir/"},
    ]
    lease = await manager.acquire(req(tmp_path, steps))
    assert await backend.get_file(lease.ref, "/workspace/cfg/settings.json") == b"{}"
    assert await backend.get_file(lease.ref, "/workspace/docs/a.md") == b"A"
    assert await backend.get_file(lease.ref, "/workspace/docs/sub/b.md") == b"B"
    assert await backend.get_file(lease.ref, "/workspace/dir/one.txt") == b"one"


async def test_failing_step_names_its_index_and_redacted_stderr(
    manager: SandboxManager, tmp_path: Path
) -> None:
    steps: list[dict[str, Any]] = [{"action": "exec", "cmd": "ok"}, {"action": "exec", "cmd": "fail now"}]
    with pytest.raises(PrepareError) as info:
        await manager.acquire(req(tmp_path, steps))
    assert info.value.step == 1
    assert info.value.stderr_head.startswith("boom:") and len(info.value.stderr_head) <= 200
    assert "abcdef123456" not in str(info.value)
    box = next(iter(manager.registry.all()))
    assert box.busy == 0


async def test_ignore_error_goes_on(manager: SandboxManager, backend: FakeBackend, tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"action": "exec", "cmd": "fail", "ignore_error": True},
        {"action": "exec", "cmd": "after"},
    ]
    await manager.acquire(req(tmp_path, steps))
    assert user_cmds(backend) == ["fail", "after"]


async def test_background_exec_is_detached(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    await manager.acquire(req(tmp_path, [{"action": "exec", "cmd": "serve", "background": True}]))
    assert user_cmds(backend) == ['nohup sh -c serve >/dev/null 2>&1 & echo "cage-background $!"']


async def test_oneshot_box_is_removed_when_prepare_fails(
    backend: FakeBackend, manager: SandboxManager, tmp_path: Path
) -> None:
    request = req(tmp_path, [{"action": "exec", "cmd": "fail"}], lifecycle="oneshot")
    with pytest.raises(PrepareError):
        await manager.acquire(request)
    assert backend.boxes == {} and len(manager.registry) == 0


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "~", "~/../x", "", "a\0b"])
def test_relative_path_refuses_escapes(path: str) -> None:
    with pytest.raises(WorkspaceError):
        relative_path(path)


@pytest.mark.parametrize(("path", "expected"), [("~/a/b", "a/b"), ("a//b/", "a/b"), ("./x", "x")])
def test_relative_path_normalises(path: str, expected: str) -> None:
    assert relative_path(path) == expected


def test_copy_source_must_stay_in_the_assistant_dir(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    inner = tmp_path / "assistant"
    inner.mkdir()
    (inner / "link").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(WorkspaceError):
        host_source(inner, "../outside.txt")
    with pytest.raises(WorkspaceError):
        host_source(inner, "link")
    with pytest.raises(WorkspaceError):
        host_source(inner, "/etc/passwd")


async def test_traversal_steps_are_refused_before_anything_is_written(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    with pytest.raises(WorkspaceError):
        await manager.acquire(
            req(tmp_path, [{"action": "file", "path": "../../etc/cron.d/x", "content": "x"}])
        )
    assert all(not files for files in backend.volumes.values())
