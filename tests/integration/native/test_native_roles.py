"""The native loop's `light` role end to end (yaocode on the host, tai in the box through the model
gateway): `runner.connectors.light` writes the compaction summary
(the fake model server sees the light model on the summary request, the default model on the
loop's own requests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.llm.compaction import SUMMARY_SYSTEM
from tests.fakes.model_server import FakeModelServer
from tests.integration.native.conftest import NativeApp
from tests.integration.native.test_native_package import FIRST_RUN_TIMEOUT, checkout
from tests.integration.runners.conftest import cage_run

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("runner", ["yaocode", "tai"])
def test_compaction_summaries_come_from_the_light_model(
    runner: str, app: NativeApp, native_server: FakeModelServer, tmp_path: Path
) -> None:
    scenario = f"compact-light-{runner}"
    native_server.add_scenario(scenario, [{"shell": "python3 -c \"print('y' * 8000)\""}, {"text": "printed"}])
    aid = app.assistant(runner, scenario=scenario)
    light = {
        "label": "light",
        "type": "anthropic",
        "options": {
            "model": f"claude-haiku-4-5@{scenario}",
            "key": "$ENV.FAKE_MODEL_KEY",
            "host": native_server.url,
            "max_retries": 1,
        },
    }
    (app.root / "connectors" / "fake-light.conn.yao").write_text(json.dumps(light))
    adir = app.root / "assistants" / "native" / runner
    doc = json.loads((adir / "package.yao").read_text())
    doc["compaction"] = {"budget_tokens": 2500}
    (adir / "package.yao").write_text(json.dumps(doc))
    sandbox = json.loads((adir / "sandbox.yao").read_text())
    sandbox["runner"]["connectors"] = {"light": "fake-light"}
    (adir / "sandbox.yao").write_text(json.dumps(sandbox))
    ws = checkout(tmp_path, runner)
    session = f"compact-light-{runner}-{tmp_path.name}"
    first = cage_run(app, aid, ws, "print a lot", session=session, timeout=FIRST_RUN_TIMEOUT)
    assert first.code == 0, first.stderr[-3000:]
    assert first.stderr.count("runner.connectors.light") == 0  # no "role is ignored" warning
    before = len(native_server.requests.for_scenario(scenario))
    second = cage_run(app, aid, ws, "print it again", session=session, timeout=FIRST_RUN_TIMEOUT)
    assert second.code == 0, second.stderr[-3000:]
    later = native_server.requests.for_scenario(scenario)[before:]
    summary, *steps = [r.body for r in later]
    assert summary["system"] == SUMMARY_SYSTEM and summary["model"] == f"claude-haiku-4-5@{scenario}"
    assert steps and all(step["model"] == f"claude-sonnet-4-5@{scenario}" for step in steps)
    assert "<summary of the earlier conversation>" in json.dumps(steps[0]["messages"])
