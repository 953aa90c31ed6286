"""M2: request options only tighten what the operator configured.

`options.connector` may only pick among the assistant's own connector and its
`connector_options.connectors`, and is refused before anything starts; a requested turn timeout
is the smaller of the request's and the assistant's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from anyio.abc import TaskGroup

from orchestrator.errors import UsageError
from orchestrator.pipeline import TurnOptions
from orchestrator.pipeline.options import tightened
from orchestrator.store import Store
from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.pipeline_rig import Rig
from tests.unit.sandbox.fakes import FakeBackend

CONNECTOR = '{"type": "openai", "options": {"model": "m", "key": "k", "host": "http://127.0.0.1:9"}}'
HOOK = "async def create(ctx, messages, options):\n    await ctx.send('picked ' + str(options.get('connector')))\n"


async def test_an_unoffered_connector_is_refused_before_the_turn_starts(
    rig: Rig, store: Store, app_root: Path
) -> None:
    (app_root / "connectors").mkdir(exist_ok=True)
    for name in ("mock", "mock-b", "secret-prod"):
        (app_root / "connectors" / f"{name}.conn.yao").write_text(CONNECTOR)
    write_assistant(
        app_root,
        "hooks.picky",
        package={"name": "picky", "connector": "mock", "connector_options": {"connectors": ["mock-b"]}},
        hooks=HOOK,
    )
    with pytest.raises(
        UsageError, match=r"options.connector 'secret-prod' is not offered by assistant 'hooks.picky'"
    ):
        await rig.service.start(
            rig.turn("hooks.picky", "hi", session_id="chat-p1", options=TurnOptions(connector="secret-prod"))
        )
    assert await store.sessions.get("chat-p1") is None  # nothing started, nothing written

    ran = await rig.run("hooks.picky", "hi", session_id="chat-p2", options=TurnOptions(connector="mock-b"))
    assert ran.texts() == ["picked mock-b"]


async def test_an_llm_turn_runs_on_the_offered_connector_the_request_picks(
    store: Store,
    app_root: Path,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    """`connector_options.connectors` has an effect: the model call goes to the one picked."""
    with FakeModelServer("text", host="127.0.0.1") as server:
        server.add_scenario("own", [{"text": "from the own connector"}])
        server.add_scenario("picked", [{"text": "from the picked connector"}])
        for name in ("own", "picked"):
            write_connector(
                app_root,
                name,
                kind="openai",
                model=f"fake-model@{name}",
                host=server.url + "/v1",
                key_env="K",
            )
        package = {"name": "llm", "connector": "own", "connector_options": {"connectors": ["picked"]}}
        write_assistant(app_root, "llm.picky", package=package, prompts="- role: system\n  content: Hi.\n")
        rig = Rig.build(
            app_root,
            store,
            FakeBackend(),
            tasks=turn_tasks,
            data_dir=tmp_path / "d",
            environ={"K": "sk-fake-000"},
        )
        try:
            picked = await rig.run(
                "llm.picky", "hi", session_id="chat-l1", options=TurnOptions(connector="picked")
            )
            own = await rig.run("llm.picky", "hi", session_id="chat-l2")
        finally:
            await rig.service.aclose()
        asked = [r.scenario for r in server.requests.all() if r.api == "openai-chat"]
    assert picked.texts() == ["from the picked connector"] and own.texts() == ["from the own connector"]
    assert asked == ["picked", "own"]


async def test_an_assistant_without_connector_options_takes_no_other_connector(rig: Rig) -> None:
    with pytest.raises(UsageError, match=r"connector_options.connectors: none"):
        await rig.service.start(rig.turn("hooks.echo", "hi", options=TurnOptions(connector="anything")))


@pytest.mark.parametrize(
    ("asked", "configured", "expected"),
    [
        (None, 600.0, 600.0),
        (60.0, 600.0, 60.0),
        (7 * 86400.0, 600.0, 600.0),
        (30.0, None, 30.0),
        (None, None, None),
    ],
)
def test_a_requested_limit_only_tightens(
    asked: float | None, configured: float | None, expected: float | None
) -> None:
    assert tightened(asked, configured) == expected
