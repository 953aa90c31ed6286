"""The dev app's plain LLM assistants: global prompts from agent/prompts.yml (with Yao's $SYS.
variables filled in) come before the assistant's own, unless it disables them."""

from __future__ import annotations

import re
from datetime import datetime

from orchestrator.dsl import Prompt, expand_prompts
from tests.fakes.model_server import FakeModelServer
from tests.integration.yao.conftest import ANSWER
from tests.pipeline_rig import Rig


def _system(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    return "\n".join(str(m["content"]) for m in messages if m["role"] == "system")


async def test_global_prompts_lead_and_their_variables_are_filled(
    yao_rig: Rig, yao_model_server: FakeModelServer
) -> None:
    before = len(yao_model_server.requests)
    ran = await yao_rig.run("hello", "Hi")
    assert ran.result.status == "completed", ran.result.error
    assert ran.result.content == ANSWER
    system = _system(yao_model_server.requests.all()[before].body)
    assert system.startswith("# System Context")
    assert re.search(r"Current Time: \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", system), system
    assert "$SYS." not in system


async def test_disable_global_prompts_leaves_them_out(
    yao_rig: Rig, yao_model_server: FakeModelServer
) -> None:
    before = len(yao_model_server.requests)
    ran = await yao_rig.run("tests.fullfields", "Hi")
    assert ran.result.status == "completed", ran.result.error
    system = _system(yao_model_server.requests.all()[before].body)
    assert "System Context" not in system and "verify all available fields" in system


def test_prompt_variables() -> None:
    [p] = expand_prompts(
        [
            Prompt(
                role="system",
                content="$SYS.DATE $SYS.WEEKDAY $SYS.NOPE $ENV.BRAND/$ENV.UNSET $CTX.assistant_id",
            )
        ],
        environ={"BRAND": "Yao"},
        context={"assistant_id": "hello"},
        now=datetime(2026, 12, 1, 9, 30),
    )
    assert p.content == "2026-12-01 Tuesday $SYS.NOPE Yao/ hello"
