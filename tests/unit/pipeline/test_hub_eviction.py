"""M9: the hub keeps no state for idle sessions (it used to keep one emitter per session forever)."""

from __future__ import annotations

from tests.pipeline_rig import Rig


async def test_a_finished_turn_leaves_no_emitter_behind(rig: Rig) -> None:
    for n in range(5):
        ran = await rig.run("hooks.echo", f"hi {n}", session_id=f"chat-evict-{n}")
        assert ran.result.status == "completed"
    assert rig.service.hub.tracked() == 0
    again = await rig.run("hooks.echo", "again", session_id="chat-evict-0")  # reloaded from the log
    assert again.events[0].seq > 1 and rig.service.hub.tracked() == 0
