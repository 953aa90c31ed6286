"""codex asking through Cage: hook input -> `ToolRequest`s, the driver's answer lines, the gate
translator on recorded lines, the asking exec, and the in-container driver + hook as real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
import uuid
from pathlib import Path
from typing import Any

from orchestrator.permissions import Decision, ToolRequest
from orchestrator.stream import CountingIds, TurnBuilder, dump_event, validate_stream
from runners.base import ControlSource, PermissionAsk, TurnRequest
from runners.codex import CodexAdapter
from runners.codex.gate import answer_line, asks_for, tool_requests
from runners.codex.gate_translator import GateTranslator
from tests.unit.runners.test_codex_exec import turn as exec_turn

GATE_DIR = Path(__file__).resolve().parents[3] / "runners" / "codex" / "incontainer"
THREAD = "01a2339a-d9ec-7c20-ad17-e1c5e07989a8"
# Lines as codex 0.171.0 printed them under the gate driver (recorded against the fake model).
TRUST_WARNING = json.dumps(
    {
        "type": "item.completed",
        "item": {
            "id": "item_0",
            "type": "error",
            "message": (
                "`--dangerously-bypass-hook-trust` is enabled. Enabled hooks may run without review for this invocation."
            ),
        },
    }
)
BASH_HOOK = {
    "session_id": THREAD,
    "turn_id": "01a2339a-da0a-7d62-9593-58460e215e10",
    "cwd": "/workspace/ws",
    "hook_event_name": "PreToolUse",
    "model": "gpt-5.5",
    "permission_mode": "bypassPermissions",
    "tool_name": "Bash",
    "tool_input": {"command": "echo hi > ran.txt"},
    "tool_use_id": "call_5bbe8de6f6a67650c8b1_0",
}
PATCH = "*** Begin Patch\n*** Add File: added.txt\n+hello\n*** Update File: notes.txt\n@@\n-old\n+new\n*** End Patch\n"
PATCH_HOOK = {
    **BASH_HOOK,
    "tool_name": "apply_patch",
    "tool_input": {"command": PATCH},
    "tool_use_id": "call_a67aa65c78c6b4a691d5_0",
}
ALLOW = Decision(allow=True, by="user")
DENY = Decision(allow=False, by="policy", message="bash is not allowed here", rule="bash: *")


def request_line(request_id: str, payload: dict[str, Any]) -> str:
    return json.dumps({"type": "cage.gate.request", "id": request_id, "payload": payload})


def test_a_shell_call_is_bash_with_its_command_as_subject() -> None:
    [request] = tool_requests(BASH_HOOK)
    assert request == ToolRequest(
        tool="bash",
        input={"command": "echo hi > ran.txt"},
        subject="echo hi > ran.txt",
        call_id="call_5bbe8de6f6a67650c8b1_0",
        runner="codex",
    )


def test_a_patch_asks_once_per_file_with_absolute_paths() -> None:
    requests = tool_requests(PATCH_HOOK)
    assert [(r.tool, r.subject) for r in requests] == [
        ("write", "/workspace/ws/added.txt"),
        ("edit", "/workspace/ws/notes.txt"),
    ]
    moved = "*** Begin Patch\n*** Update File: a.py\n*** Move to: ../../etc/b.py\n@@\n-x\n+y\n*** End Patch\n"
    requests = tool_requests({**PATCH_HOOK, "tool_input": {"command": moved}})
    assert [(r.tool, r.subject) for r in requests] == [("edit", "/workspace/ws/a.py"), ("write", "/etc/b.py")]


def test_mcp_and_other_tools_get_their_canonical_names() -> None:
    [mcp] = tool_requests({**BASH_HOOK, "tool_name": "mcp__orch__report", "tool_input": {"text": "x"}})
    assert (mcp.tool, mcp.subject, dict(mcp.input)) == ("mcp:orch/report", "", {"text": "x"})
    [image] = tool_requests({**BASH_HOOK, "tool_name": "view_image", "tool_input": {"path": "img.png"}})
    assert (image.tool, image.subject) == ("read", "/workspace/ws/img.png")
    [other] = tool_requests({**BASH_HOOK, "tool_name": "Update_Plan", "tool_input": {}})
    assert other.tool == "update_plan"
    [broken] = tool_requests({})
    assert broken.tool == "unknown"


def test_answer_lines_carry_the_refusal_message() -> None:
    assert json.loads(answer_line("3", DENY)) == {
        "id": "3",
        "allow": False,
        "message": "bash is not allowed here",
    }
    assert json.loads(answer_line("3", ALLOW)) == {"id": "3", "allow": True, "message": ""}
    assert json.loads(answer_line("4", Decision(allow=False, by="timeout")))["message"]
    assert answer_line("3", ALLOW).endswith(b"\n")


def test_a_multi_file_patch_is_answered_once_by_the_first_refusal_or_the_last_allow() -> None:
    message = {"type": "cage.gate.request", "id": "7", "payload": PATCH_HOOK}
    first, second = asks_for(message)
    assert first.reply(ALLOW) == b""
    assert json.loads(second.reply(ALLOW)) == {"id": "7", "allow": True, "message": ""}
    first, second = asks_for(message)
    assert json.loads(first.reply(DENY))["allow"] is False
    assert second.reply(ALLOW) == b""  # the CLI heard its answer already
    assert second.reply(DENY) == b""


def translate(lines: list[str]) -> tuple[list[dict[str, Any]], list[PermissionAsk], GateTranslator]:
    builder = TurnBuilder(CountingIds(), runner="codex", clock=lambda: 0)
    turn = TurnRequest(
        assistant_id="a", owner="o", session_id="c", turn_id="t", prompt="p", ask_permissions=True
    )
    translator = CodexAdapter().translator(builder, turn)
    assert isinstance(translator, GateTranslator) and isinstance(translator, ControlSource)
    events = builder.stream_start("a")
    asks: list[PermissionAsk] = []
    for text in lines:
        events += translator.feed(text)
        asks += [a for a in translator.take_requests() if isinstance(a, PermissionAsk)]
    events += translator.close(0, "")
    events += builder.stream_end(translator.outcome.status)
    dumped = [dump_event(e) for e in events]
    assert validate_stream(dumped, stamped=False) == []
    return dumped, asks, translator


def test_the_gate_translator_surfaces_requests_and_drops_the_hook_trust_warning() -> None:
    lines = [
        json.dumps({"type": "thread.started", "thread_id": THREAD}),
        TRUST_WARNING,
        TRUST_WARNING,
        json.dumps({"type": "turn.started"}),
        request_line("1", BASH_HOOK),
        json.dumps(
            {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "done"}}
        ),
        json.dumps({"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}}),
    ]
    events, asks, translator = translate(lines)
    assert [a.request.subject for a in asks] == ["echo hi > ran.txt"]
    assert json.loads(asks[0].reply(DENY)) == {
        "id": "1",
        "allow": False,
        "message": "bash is not allowed here",
    }
    assert not [e for e in events if e["type"] == "runner/raw"]  # no warning, no raw request line
    assert translator.outcome.status == "completed"
    assert translator.resume_state["thread_id"] == THREAD
    assert translator.take_requests() == []


def test_text_that_only_mentions_a_request_is_not_one() -> None:
    mention = json.dumps(
        {
            "type": "item.completed",
            "item": {"id": "item_1", "type": "agent_message", "text": request_line("9", BASH_HOOK)},
        }
    )
    events, asks, _ = translate([json.dumps({"type": "thread.started", "thread_id": THREAD}), mention])
    assert asks == []
    assert any(e["type"] == "text" for e in events)


def test_the_asking_exec_runs_codex_under_the_driver_with_the_hook_configured() -> None:
    rexec = CodexAdapter().build_exec(exec_turn(ask_permissions=True, turn_id="turn/1"))
    argv = list(rexec.argv)
    split = argv.index("--")
    assert argv[:split] == [
        "python3",
        "/workspace/.cage-state/runner/codex/gate/gate_driver.py",
        "--socket",
        "cage-codex-gate-turn_1",
        "--allow",
        "update_plan",
    ]
    assert argv[split + 1 : split + 3] == ["codex", "exec"]
    assert "--dangerously-bypass-hook-trust" in argv and "--dangerously-bypass-approvals-and-sandbox" in argv
    assert rexec.keep_stdin_open and rexec.stdin is None
    files = {f.path: f for f in rexec.files}
    config = tomllib.loads(files[".cage-state/home/.codex/config.toml"].content)
    [hook] = config["hooks"]["PreToolUse"]
    assert hook["matcher"] == ".*"
    assert hook["hooks"][0]["command"] == (
        "python3 /workspace/.cage-state/runner/codex/gate/gate_hook.py cage-codex-gate-turn_1"
    )
    assert hook["hooks"][0]["timeout"] >= 3600
    assert files[".cage-state/runner/codex/gate/gate_hook.py"].mode == 0o755
    assert "def main" in files[".cage-state/runner/codex/gate/gate_driver.py"].content


def test_the_asking_exec_sends_a_long_prompt_as_the_drivers_first_stdin_line() -> None:
    prompt = "x" * 200_000
    rexec = CodexAdapter().build_exec(exec_turn(ask_permissions=True, prompt=prompt))
    assert "--prompt-stdin" in rexec.argv and rexec.argv[-1] == "-"
    assert rexec.stdin == (json.dumps(prompt) + "\n").encode()


def test_without_asking_the_exec_is_unchanged() -> None:
    plain = CodexAdapter().build_exec(exec_turn())
    assert plain.argv[0] == "codex" and not plain.keep_stdin_open
    assert "hooks" not in tomllib.loads(plain.files[0].content)
    assert len(plain.files) == 2


FAKE_CODEX = textwrap.dedent("""
    import json, subprocess, sys
    hook, name = sys.argv[1], sys.argv[2]
    print(json.dumps({"type": "thread.started", "thread_id": "t"}), flush=True)
    for command in sys.argv[3:]:
        tool = "update_plan" if command == "plan" else "Bash"
        payload = json.dumps({"tool_name": tool, "tool_input": {"command": command}, "tool_use_id": command})
        done = subprocess.run([sys.executable, hook, name], input=payload.encode(), capture_output=True)
        print(json.dumps({"ran": command, "code": done.returncode, "stderr": done.stderr.decode().strip()}),
              flush=True)
    print(json.dumps({"prompt": sys.stdin.read()}), flush=True)
""")


def run_driver(
    tmp_path: Path, commands: list[str], answer: Any, *, prompt: str | None = None
) -> list[dict[str, Any]]:
    """The real driver around a fake codex that runs the real hook once per command; `answer`
    maps each request line to the answer line (None: close stdin instead)."""
    fake = tmp_path / "fake_codex.py"
    fake.write_text(FAKE_CODEX)
    name = f"cage-test-{uuid.uuid4().hex}"
    argv = [sys.executable, str(GATE_DIR / "gate_driver.py"), "--socket", name, "--allow", "update_plan"]
    if prompt is not None:
        argv.append("--prompt-stdin")
    argv += ["--", sys.executable, str(fake), str(GATE_DIR / "gate_hook.py"), name, *commands]
    lines = []
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdin is not None and process.stdout is not None
        if prompt is not None:
            process.stdin.write(json.dumps(prompt) + "\n")
            process.stdin.flush()
        for raw in process.stdout:
            message = json.loads(raw)
            lines.append(message)
            if message.get("type") == "cage.gate.request":
                reply = answer(message)
                if reply is None:
                    process.stdin.close()
                else:
                    process.stdin.write(reply.decode())
                    process.stdin.flush()
        if not process.stdin.closed:
            process.stdin.close()
        assert process.wait(timeout=30) == 0
    return lines


def test_driver_and_hook_allow_and_refuse_as_answered(tmp_path: Path) -> None:
    def answer(message: dict[str, Any]) -> bytes:
        [ask] = asks_for(message)
        return ask.reply(ALLOW if ask.request.subject == "ls" else DENY)

    lines = run_driver(tmp_path, ["ls", "plan", "rm -rf /"], answer)
    requests = [m for m in lines if m.get("type") == "cage.gate.request"]
    assert [r["payload"]["tool_input"]["command"] for r in requests] == ["ls", "rm -rf /"]
    # codex's lines pass unchanged and in order; the driver's request lines come in between, each
    # before the line of the call it held, but codex's line printed just before a hook ran may
    # come after that hook's request (two threads write; under load the copying one was late)
    codex = [m for m in lines if m.get("type") != "cage.gate.request"]
    assert codex[0] == {"type": "thread.started", "thread_id": "t"}
    assert [m["ran"] for m in codex if "ran" in m] == ["ls", "plan", "rm -rf /"]
    for request in requests:
        command = request["payload"]["tool_input"]["command"]
        assert lines.index(request) < next(n for n, m in enumerate(lines) if m.get("ran") == command)
    ran = {m["ran"]: m for m in lines if "ran" in m}
    assert ran["ls"]["code"] == 0 and ran["ls"]["stderr"] == ""
    assert ran["plan"]["code"] == 0  # allowed by the driver without a request line
    assert ran["rm -rf /"]["code"] == 2 and ran["rm -rf /"]["stderr"] == "bash is not allowed here"
    assert lines[-1] == {"prompt": ""}  # codex's stdin is /dev/null


def test_when_stdin_closes_every_held_and_later_call_is_refused(tmp_path: Path) -> None:
    lines = run_driver(tmp_path, ["first", "second"], lambda _message: None, prompt="long prompt")
    ran = [m for m in lines if "ran" in m]
    assert [(m["code"], "closed" in m["stderr"]) for m in ran] == [(2, True), (2, True)]
    assert lines[-1] == {"prompt": "long prompt"}


def test_the_hook_fails_closed_without_a_driver() -> None:
    done = subprocess.run(
        [sys.executable, str(GATE_DIR / "gate_hook.py"), f"cage-none-{uuid.uuid4().hex}"],
        input=json.dumps(BASH_HOOK).encode(),
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 2 and b"refused" in done.stderr
