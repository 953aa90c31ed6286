"""Runner mode on the fake sandbox backend: the claude adapter reads a recorded transcript, the
pipeline wraps it in a well-formed turn, stores the resume state on the session, releases the box."""

from __future__ import annotations

from pathlib import Path

from anyio.abc import TaskGroup

from orchestrator.sandbox.backend import ExecSpec, SandboxRef
from orchestrator.store import Store
from tests.fakes.assistants import write_assistant, write_connector
from tests.pipeline_rig import Rig
from tests.unit.sandbox.fakes import FakeBackend, FakeExecHandle, FakeResult

GOLDEN = Path(__file__).parents[2] / "golden" / "claude" / "2.1.197" / "hello.in.jsonl"
HOOKS = """
async def create(ctx, messages, options):
    await ctx.sandbox.write_file("notes/from-hook.txt", "written by create")
    return {"messages": [{"role": "user", "content": "rewritten: " + messages[-1]["content"]}]}


async def next(ctx, payload, options):
    return {"data": {"tools": [t["tool"] for t in payload["tools"]],
                     "completion": payload["completion"]["content"],
                     "note": await ctx.sandbox.read_file("notes/from-hook.txt")}}
"""


class StdinRecorder(FakeExecHandle):
    """A fake exec that keeps what the runner wrote to stdin (Claude gets its prompt there)."""

    def __init__(self, result: FakeResult, sink: list[bytes]) -> None:
        super().__init__(result)
        self._sink = sink

    async def write_stdin(self, data: bytes) -> None:
        self._sink.append(data)


class RecordingBackend(FakeBackend):
    def __init__(self, lines: list[bytes]) -> None:
        super().__init__(lambda ref, spec: FakeResult(stdout=lines))
        self.stdin: list[bytes] = []

    async def exec(self, ref: SandboxRef, spec: ExecSpec) -> FakeExecHandle:
        handle = await super().exec(ref, spec)
        return StdinRecorder(handle._result, self.stdin)


def claude_assistant(root: Path, *, lifecycle: str = "session") -> str:
    write_connector(
        root, "fake", kind="anthropic", model="claude-sonnet-4-5", host="http://127.0.0.1:9", key_env="K"
    )
    write_assistant(
        root,
        "tests.claude",
        package={"name": "claude under test", "connector": "fake"},
        prompts="- role: system\n  content: be brief\n",
        hooks=HOOKS,
        sandbox={"version": "2.0", "runner": {"name": "claude"}, "lifecycle": lifecycle},
    )
    return "tests.claude"


async def test_runner_turn_with_hooks_on_the_sandbox(
    app_root: Path, store: Store, tmp_path: Path, turn_tasks: TaskGroup
) -> None:
    backend = RecordingBackend(GOLDEN.read_bytes().splitlines())
    rig = Rig.build(
        app_root,
        store,
        backend,
        tasks=turn_tasks,
        data_dir=tmp_path / "d",
        environ={"K": "sk-ant-fake-key-0001"},
    )
    assistant_id = claude_assistant(app_root)
    ran = await rig.run(assistant_id, "say hello", session_id="chat-r")
    await rig.service.aclose()

    assert ran.result.status == "completed", ran.result.error
    assert ran.starts()[None].runner == "claude"
    phases = [e.props.phase for e in ran.events if e.type == "event" and e.props.event == "sandbox/status"]
    assert phases == ["creating", "ready"]
    assert any(e.type == "execute" for e in ran.events)
    assert ran.result.content  # the transcript's answer
    data = ran.result.data
    assert isinstance(data, dict)
    assert data["tools"] == ["Bash"] and data["completion"] == ran.result.content
    assert data["note"] == "written by create"
    assert any(
        b"rewritten: say hello" in p for p in backend.stdin
    )  # the runner got the Create hook's messages
    session = await store.sessions.require("chat-r")
    assert session.resume["claude:tests.claude"]  # the CLI session id, for the next turn to resume
    [box] = list(backend.boxes.values())
    assert box.ref.labels["cage.session"] == "chat-r"  # names are digests: the session is a label
    assert box.ref.status.value == "running"  # session lifecycle: kept
    [turn] = await store.turns.of_session("chat-r")
    assert turn.usage.input_tokens > 0


async def test_oneshot_sandbox_is_released_when_a_hook_fails(
    app_root: Path,
    store: Store,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    backend = FakeBackend()
    rig = Rig.build(
        app_root,
        store,
        backend,
        tasks=turn_tasks,
        data_dir=tmp_path / "d",
        environ={"K": "sk-ant-fake-key-0001"},
    )
    write_assistant(
        app_root,
        "tests.boom",
        package={"name": "boom"},
        hooks="def create(ctx, messages, options):\n    raise OSError('disk on fire')\n",
        sandbox={"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "oneshot"},
    )
    ran = await rig.run("tests.boom", "x")
    await rig.service.aclose()
    assert ran.result.status == "error" and "OSError: disk on fire" in (ran.result.error or "")
    assert backend.boxes == {} and len(backend.removed) == 1


async def test_attachments_land_in_the_workspace_before_the_hooks(
    app_root: Path,
    store: Store,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    from orchestrator.pipeline import Attachment

    backend = FakeBackend()
    rig = Rig.build(app_root, store, backend, tasks=turn_tasks, data_dir=tmp_path / "d")
    write_assistant(
        app_root,
        "tests.attach",
        package={"name": "attach"},
        hooks=(
            "async def create(ctx, messages, options):\n"
            "    await ctx.send(await ctx.sandbox.read_file('attachments/notes.txt'))\n"
            "    return {'delegate': {'agent_id': 'hooks.echo'}}\n"
        ),
        sandbox={"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "oneshot"},
    )
    turn = rig.turn("tests.attach", "read it").model_copy(
        update={"attachments": (Attachment(name="notes.txt", content=b"attached words"),)}
    )
    handle = await rig.service.start(turn)
    events = [e async for e in handle.events()]
    result = await handle.result()
    await rig.service.aclose()
    assert result.status == "completed", result.error
    texts = [e.props.content for e in events if e.type == "text" and e.thread_id is None]
    assert texts == ["attached words"]
    assert backend.boxes == {}  # oneshot: removed after the turn
