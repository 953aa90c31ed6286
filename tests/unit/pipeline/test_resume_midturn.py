"""M5: a runner's resume state is saved as soon as the runner reports it, not at the turn's end.

The first turn's CLI (the real claude adapter and translator over the fake backend) prints its
`system/init` line with its session id and then hangs, as a CLI does while the model thinks.
While that turn is still `running`, the session row already holds the id: a `kill -9` of the server
at this point keeps it. The process then "dies" (the service is dropped, recovery closes the
turn on the same database, a new service starts), and the next turn's CLI is started with that
session id.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from orchestrator.pipeline.recovery import close_unfinished_turns
from orchestrator.pipeline.resume import resume_key
from orchestrator.sandbox.backend import ExecItem, ExecSpec, SandboxRef
from orchestrator.store import Store
from tests.pipeline_rig import Rig
from tests.unit.pipeline.test_runner_mode import GOLDEN, claude_assistant
from tests.unit.sandbox.fakes import FakeBackend, FakeExecHandle, FakeResult

REPORTED = "0f6c1c2e-8d1a-4f0e-9b5e-3a7d2c1b0a99"
"""The session id the hanging CLI reports (neither Cage's deterministic id nor the golden's)."""


class HangingHandle(FakeExecHandle):
    """Prints the init line, then nothing until it is signalled or closed."""

    def __init__(self, init: bytes) -> None:
        super().__init__(FakeResult(exit_code=130))
        self._init = init
        self._stop = anyio.Event()

    async def _lines(self) -> AsyncIterator[ExecItem]:
        yield self._init
        await self._stop.wait()

    async def wait(self) -> int:
        return 130

    async def signal(self, sig: object) -> None:
        self._stop.set()

    async def aclose(self) -> None:
        self.closed = True
        self._stop.set()


class HangingBackend(FakeBackend):
    def __init__(self, init: bytes) -> None:
        super().__init__()
        self._init = init
        self.argvs: list[tuple[str, ...]] = []

    async def exec(self, ref: SandboxRef, spec: ExecSpec) -> FakeExecHandle:
        await super().exec(ref, spec)
        self.argvs.append(tuple(spec.argv))
        return HangingHandle(self._init)


class RecordingBackend(FakeBackend):
    def __init__(self, lines: list[bytes]) -> None:
        super().__init__(lambda ref, spec: FakeResult(stdout=lines))
        self.argvs: list[tuple[str, ...]] = []

    async def exec(self, ref: SandboxRef, spec: ExecSpec) -> FakeExecHandle:
        self.argvs.append(tuple(spec.argv))
        return await super().exec(ref, spec)


def init_line() -> bytes:
    first = json.loads(GOLDEN.read_bytes().splitlines()[0])
    assert first["type"] == "system" and first["subtype"] == "init"
    first["session_id"] = REPORTED
    return json.dumps(first).encode()


async def test_resume_state_is_saved_mid_turn_and_the_next_turn_resumes_it(
    app_root: Path,
    store: Store,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    assistant_id = claude_assistant(app_root)
    key = resume_key(assistant_id, "claude")
    environ = {"K": "sk-ant-fake-key-0001"}
    hanging = HangingBackend(init_line())
    first = Rig.build(app_root, store, hanging, tasks=turn_tasks, data_dir=tmp_path / "d", environ=environ)
    turn = first.turn(assistant_id, "think hard", session_id="chat-mid")
    handle = await first.service.start(turn)
    try:
        with anyio.fail_after(20):
            while not (session := await store.sessions.get("chat-mid")) or key not in session.resume:  # noqa: ASYNC110 - the store has no change event
                await anyio.sleep(0.05)
        record = await store.turns.get(turn.turn_id)
        assert record is not None and record.status == "running"  # saved before any end
        assert session.resume[key] == {"session_id": REPORTED}
        assert REPORTED not in hanging.argvs[0]  # the first turn did not know it
    finally:
        await handle.interrupt(force=True)
        with anyio.fail_after(20):
            await handle.result()
        await first.service.aclose()

    # What a restart after `kill -9` does: close what is unfinished, then a new service.
    await close_unfinished_turns(store)
    backend = RecordingBackend(GOLDEN.read_bytes().splitlines())
    second = Rig.build(app_root, store, backend, tasks=turn_tasks, data_dir=tmp_path / "d", environ=environ)
    try:
        ran = await second.run(assistant_id, "go on", session_id="chat-mid")
    finally:
        await second.service.aclose()
    assert ran.result.status == "completed", ran.result.error
    assert REPORTED in backend.argvs[-1]  # the CLI is started on the saved session
