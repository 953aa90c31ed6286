"""The dev app's eleven Sandbox V2 test assistants, unchanged, run one turn each on real
containers through the real pipeline: the claude, opencode and yaocode runners against the fake
model server (Yao's `yao` runner is Cage's `yaocode`; Yao's Tai images map to Cage's runner
images). Whatever the lifecycle, the boxes are gone when the test run ends (labelled)."""

from __future__ import annotations

import docker
import pytest

from tests.integration.yao.conftest import needs_node
from tests.pipeline_rig import Rig
from tests.unit.dsl.test_yao_layout import SANDBOX_V2

pytestmark = [pytest.mark.slow, needs_node]

RUNNERS = {
    "hooks-only": "yaocode",
    "jsapi-v2": "yaocode",
    "opencode-oneshot-cli": "opencode",
    "opencode-session-cli": "opencode",
    "opencode-vision-cli": "opencode",
}


@pytest.mark.parametrize("name", SANDBOX_V2)
async def test_a_sandbox_v2_assistant_runs_one_turn(
    yao_docker_rig: Rig, docker_engine: docker.DockerClient, name: str
) -> None:
    assistant_id = f"tests.sandbox-v2.{name}"
    ran = await yao_docker_rig.run(assistant_id, "Reply exactly with: hello sandbox v2", limit=420)
    assert ran.result.status == "completed", ran.result.error
    assert ran.starts()[None].runner == RUNNERS.get(name, "claude")
    assert ran.result.content  # the runner's answer (the fake model's text)
    if name == "jsapi-v2":  # its Next hook drives ctx.computer and ctx.workspace in the box
        data = ran.result.data
        assert isinstance(data, dict), data
        assert data["exec_stdout"] == "jsapi-v2-test" and data["exec_exit_code"] == 0
        assert data["write_read_ok"] and data["mkdir_exists_ok"] and data["copy_ok"] and data["rename_ok"]
        assert data["remove_ok"] and data["stat_ok"]
        names = data["readdir_names"]
        assert isinstance(names, list) and "jsapi-test.txt" in names
