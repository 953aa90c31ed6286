"""The heavy runner images: each CLI really installed and runnable as `sandbox` at its pinned version."""

from __future__ import annotations

import docker
import pytest

from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.images import RUNNER_IMAGES
from tests.integration.images.conftest import run_in

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize(
    ("runner", "command", "expected"),
    [
        ("claude", "claude --version", "2.1.197 (Claude Code)"),
        ("codex", "codex --version", "codex-cli 0.171.0"),
        ("opencode", "opencode --version", "1.18.33"),
    ],
)
async def test_cli_prints_its_pinned_version_as_sandbox(
    runner: str, command: str, expected: str, builder: DockerImageBuilder, image_docker: docker.DockerClient
) -> None:
    ref = await builder.ensure(runner)
    out = run_in(image_docker, ref.tag, f"id -un; id -u; {command} 2>/dev/null")
    user, uid, *version = out.strip().splitlines()
    assert (user, uid) == ("sandbox", "1000")
    assert [line.strip() for line in version] == [expected]
    labels = image_docker.images.get(ref.tag).labels
    assert labels["cage.runner"] == runner
    assert labels["cage.cli-version"] == RUNNER_IMAGES[runner].cli_version


async def test_claude_runs_without_node(
    builder: DockerImageBuilder, image_docker: docker.DockerClient
) -> None:
    ref = await builder.ensure("claude")
    out = run_in(
        image_docker, ref.tag, "command -v node || echo no-node; env | grep -c '^CLAUDE_CODE_DISABLE'"
    )
    assert out.split() == ["no-node", "1"]


async def test_opencode_plugin_install_is_pre_empted(
    builder: DockerImageBuilder, image_docker: docker.DockerClient
) -> None:
    ref = await builder.ensure("opencode")
    out = run_in(
        image_docker,
        ref.tag,
        "d=/opt/opencode/xdg/opencode; test -d $d/node_modules && test -w $d && cat $d/package-lock.json",
    )
    assert '"@opencode-ai/plugin"' in out


async def test_tai_image_has_cage_installed(
    builder: DockerImageBuilder, image_docker: docker.DockerClient
) -> None:
    ref = await builder.ensure("tai")
    out = run_in(
        image_docker,
        ref.tag,
        "id -un; command -v cage-tai; "
        "python -c 'import importlib.metadata as m, orchestrator; print(m.version(\"cage\"))'; "
        "command -v rg git ps | wc -l",
    )
    assert out.split() == ["sandbox", "/opt/cage/bin/cage-tai", RUNNER_IMAGES["tai"].cli_version, "3"]
