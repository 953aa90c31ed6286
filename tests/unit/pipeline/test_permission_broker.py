"""The permission broker's state machine on a real store: rules at once, ask -> answer, timeout
default, "allow always" for the session (and the next turn), cancel, questions, CI mode, audit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from orchestrator.dsl.permissions import PermissionPolicy
from orchestrator.errors import NotFound, UsageError
from orchestrator.permissions import Decision, Question, ToolRequest
from orchestrator.pipeline.permissions import SESSION_RULES_KEY, PermissionBroker, Permissions, Unattended
from orchestrator.store import Store
from orchestrator.stream import CountingIds, Event, LifecycleEvent, TurnBuilder, validate_stream


class Turn:
    """A broker of one turn with its open stream; `events` collects what it emitted."""

    def __init__(self, desk: Permissions, policy: PermissionPolicy) -> None:
        self.desk = desk
        self.policy = policy
        self.builder = TurnBuilder(CountingIds(), runner="yaocode", clock=lambda: 0)
        self.events: list[Event] = list(self.builder.stream_start("a"))
        self.broker: PermissionBroker | None = None
        self._arrived = anyio.Event()

    async def emit(self, batch: Sequence[Event]) -> None:
        self.events.extend(batch)
        self._arrived.set()
        self._arrived = anyio.Event()

    async def first(self, name: str) -> dict[str, Any]:
        """The last `name` event, waiting for one to come."""
        while not self.lifecycle(name):
            await self._arrived.wait()
        return self.lifecycle(name)[-1]

    async def after(self, name: str, seen: int) -> dict[str, Any]:
        """The `name` event after the first `seen` ones, waiting for it to come."""
        while len(self.lifecycle(name)) <= seen:
            await self._arrived.wait()
        return self.lifecycle(name)[seen]

    async def open(self, unattended: Unattended | None = None) -> PermissionBroker:
        self.broker = await self.desk.broker(
            self.policy,
            session_id="c1",
            turn_id="t1",
            builder=self.builder,
            emit=self.emit,
            unattended=unattended,
        )
        return self.broker

    def lifecycle(self, name: str) -> list[dict[str, Any]]:
        return [
            e.props.model_dump()
            for e in self.events
            if isinstance(e, LifecycleEvent) and e.props.event == name
        ]

    def close(self) -> list[str]:
        self.events.extend(self.builder.stream_end("completed"))
        return validate_stream(self.events, stamped=False)


def _policy(**data: Any) -> PermissionPolicy:
    return PermissionPolicy.model_validate(data)


@pytest.fixture
async def session(store: Store) -> str:
    await store.sessions.create("alice", "a", session_id="c1")
    return "c1"


async def _answer_when_asked(turn: Turn, decision: str, message: str | None = None) -> str:
    """Wait for the request event, answer it as a client would; return its id."""
    request_id = str((await turn.first("permission/request"))["request_id"])
    await turn.desk.respond_permission("c1", request_id, decision, message, actor="key-1")  # type: ignore[arg-type]
    return request_id


async def test_rules_decide_at_once_and_only_denials_are_reported(store: Store, session: str) -> None:
    turn = Turn(Permissions(store), _policy(rules=[{"allow": {"bash": "git *"}}, {"deny": "write"}]))
    broker = await turn.open()
    assert broker.asks
    allowed = await broker.check(ToolRequest("bash", subject="git status", call_id="t1"))
    assert allowed == Decision(allow=True, by="policy", rule="allow bash git *")
    denied = await broker.check(ToolRequest("write", subject="a.txt", call_id="t2"))
    assert not denied.allow and denied.by == "policy" and "deny write" in denied.message
    assert turn.lifecycle("permission/request") == []
    [resolved] = turn.lifecycle("permission/resolved")
    assert resolved["decision"] == "deny" and resolved["by"] == "policy" and resolved["tool"] == "write"
    assert resolved["tool_id"] == "t2" and resolved["rule"] == "deny write"
    assert turn.close() == []
    audit = await store.audit.list(target="c1")
    assert sorted(r.action for r in audit) == ["permission.allow", "permission.deny"]
    assert all("a.txt" not in str(r.detail) for r in audit)


async def test_ask_then_the_user_allows(store: Store, session: str) -> None:
    turn = Turn(Permissions(store), _policy(mode="ask"))
    broker = await turn.open()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_answer_when_asked, turn, "allow")
        decision = await broker.check(ToolRequest("bash", {"command": "make"}, subject="make", call_id="x"))
    assert decision.allow and decision.by == "user"
    [request] = turn.lifecycle("permission/request")
    assert request["tool"] == "bash" and request["input"] == {"command": "make"} and request["tool_id"] == "x"
    assert request["deadline"] and request["deadline"].endswith("Z") and request["rule"] is None
    [resolved] = turn.lifecycle("permission/resolved")
    assert (resolved["decision"], resolved["by"]) == ("allow", "user")
    assert turn.close() == []
    [entry] = await store.audit.list(target="c1")
    assert entry.actor == "key-1" and entry.action == "permission.allow" and entry.detail["by"] == "user"


async def test_the_user_denies_with_a_message(store: Store, session: str) -> None:
    turn = Turn(Permissions(store), _policy(rules=[{"ask": "bash"}]))
    broker = await turn.open()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_answer_when_asked, turn, "deny", "use make test instead")
        decision = await broker.check(ToolRequest("bash", subject="rm -rf build"))
    assert not decision.allow and decision.by == "user"
    assert "use make test instead" in decision.message
    assert turn.lifecycle("permission/request")[0]["rule"] == "ask bash"
    assert turn.close() == []


async def test_no_answer_applies_the_default(store: Store, session: str) -> None:
    turn = Turn(Permissions(store), _policy(mode="ask", timeout="0.2s"))
    decision = await (await turn.open()).check(ToolRequest("bash", subject="make"))
    assert not decision.allow and decision.by == "timeout" and "no answer" in decision.message
    [resolved] = turn.lifecycle("permission/resolved")
    assert (resolved["decision"], resolved["by"]) == ("deny", "timeout")
    assert turn.close() == []
    with pytest.raises(NotFound):  # too late: the request is decided
        await turn.desk.respond_permission("c1", resolved["request_id"], "allow", None)
    allowing = Turn(Permissions(store), _policy(mode="ask", timeout="0.2s", default="allow"))
    assert (await (await allowing.open()).check(ToolRequest("bash", subject="make"))).allow


async def test_allow_always_stops_asking_in_this_turn_and_the_next(store: Store, session: str) -> None:
    desk = Permissions(store)
    policy = _policy(mode="ask", timeout="5s")
    turn = Turn(desk, policy)
    broker = await turn.open()
    request = ToolRequest("bash", subject="make test")
    async with anyio.create_task_group() as tg:
        tg.start_soon(_answer_when_asked, turn, "allow_always")
        first = await broker.check(request)
    assert first.allow and first.by == "user" and first.rule == "allow bash make test"
    assert turn.lifecycle("permission/resolved")[0]["always"] is True
    second = await broker.check(request)
    assert second.allow and second.by == "policy"
    assert len(turn.lifecycle("permission/request")) == 1
    assert turn.close() == []
    session_record = await store.sessions.require("c1")
    assert session_record.metadata[SESSION_RULES_KEY] == [{"tool": "bash", "subject": "make test"}]
    next_turn = Turn(desk, policy)
    again = await (await next_turn.open()).check(request)
    assert again.allow and again.by == "policy" and next_turn.lifecycle("permission/request") == []
    with anyio.fail_after(5):  # another command still asks (and times out here)
        other = Turn(desk, _policy(mode="ask", timeout="0.1s"))
        assert not (await (await other.open()).check(ToolRequest("bash", subject="make deploy"))).allow


async def test_a_cancelled_wait_resolves_the_request_as_denied(store: Store, session: str) -> None:
    turn = Turn(Permissions(store), _policy(mode="ask"))
    broker = await turn.open()
    with anyio.move_on_after(0.3):
        await broker.check(ToolRequest("bash", subject="make"))
    [resolved] = turn.lifecycle("permission/resolved")
    assert (resolved["decision"], resolved["by"]) == ("deny", "policy")
    assert "ended" in resolved["message"]
    assert broker.waiting == 0
    assert turn.close() == []


async def test_question_round_trip_and_timeout(store: Store, session: str) -> None:
    turn = Turn(Permissions(store), _policy(timeout="0.3s"))
    broker = await turn.open()

    async def answer() -> None:
        request_id = (await turn.first("question"))["request_id"]
        with pytest.raises(UsageError):  # a question is not a permission request
            await turn.desk.respond_permission("c1", request_id, "allow", None)
        await turn.desk.respond_question("c1", request_id, "blue", actor="key-1")

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        text = await broker.ask(Question("Which colour?", options=("red", "blue"), call_id="q1"))
    assert text == "blue"
    [asked] = turn.lifecycle("question")
    assert (
        asked["text"] == "Which colour?" and asked["options"] == ("red", "blue") and asked["tool_id"] == "q1"
    )
    assert await broker.ask(Question("Still there?")) == ""
    answers = turn.lifecycle("question/answered")
    assert [(a["answer"], a["by"]) for a in answers] == [("blue", "user"), ("", "timeout")]
    assert turn.close() == []


@pytest.mark.parametrize(("mode", "allowed"), [("policy", False), ("deny", False), ("allow", True)])
async def test_ci_mode_answers_asks_without_a_human(
    store: Store, session: str, mode: Unattended, allowed: bool
) -> None:
    turn = Turn(Permissions(store), _policy(mode="ask", rules=[{"deny": {"write": "secrets/**"}}]))
    broker = await turn.open(unattended=mode)
    asked = await broker.check(ToolRequest("bash", subject="make"))
    assert asked.allow is allowed and asked.by == "policy"
    assert not (await broker.check(ToolRequest("write", subject="secrets/k"))).allow
    assert await broker.ask(Question("anyone?")) == ""
    assert len(turn.lifecycle("permission/request")) == 1
    assert [r["decision"] for r in turn.lifecycle("permission/resolved")] == [
        "allow" if allowed else "deny",
        "deny",
    ]
    assert turn.close() == []


async def test_bypass_without_rules_asks_nothing(store: Store, session: str) -> None:
    broker = await Turn(Permissions(store), PermissionPolicy()).open()
    assert not broker.asks
    assert (await broker.check(ToolRequest("bash", subject="rm -rf /"))).allow


async def test_answers_for_unknown_requests_are_refused(store: Store) -> None:
    desk = Permissions(store)
    with pytest.raises(NotFound):
        await desk.respond_permission("c1", "perm-nope", "allow", None)
    with pytest.raises(NotFound):
        await desk.respond_question("c1", "q-nope", "x")


async def test_every_kind_of_decision_is_in_the_audit_log(store: Store, session: str) -> None:
    """A rule's allow and deny, the user's deny and "allow always", the timeout's default, a cancel,
    and questions answered or not: one audit entry each, with who decided and never the subject."""
    turn = Turn(
        Permissions(store),
        _policy(
            mode="ask",
            timeout="0.2s",
            rules=[
                {"allow": {"bash": "git *"}},
                {"deny": "write"},
            ],
        ),
    )
    broker = await turn.open()

    async def answer_next(decision: str, seen: int) -> None:
        """Answer the request after the first `seen` (`Turn.first` would find the one answered before)."""
        request_id = (await turn.after("permission/request", seen))["request_id"]
        await turn.desk.respond_permission("c1", request_id, decision, None, actor="key-1")  # type: ignore[arg-type]

    await broker.check(ToolRequest("bash", subject="git status"))
    await broker.check(ToolRequest("write", subject="secret-path.txt"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_next, "deny", len(turn.lifecycle("permission/request")))
        await broker.check(ToolRequest("bash", subject="rm secret-path"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_next, "allow_always", len(turn.lifecycle("permission/request")))
        await broker.check(ToolRequest("bash", subject="make"))
    await broker.check(ToolRequest("bash", subject="make deploy"))  # nobody answers: the default
    with anyio.move_on_after(0.1):  # the turn ends while it waits
        await broker.check(ToolRequest("bash", subject="make clean"))

    async def answer() -> None:
        request_id = (await turn.first("question"))["request_id"]
        await turn.desk.respond_question("c1", request_id, "blue", actor="key-1")

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        await broker.ask(Question("Which colour?"))
    await broker.ask(Question("Still there?"))
    assert turn.close() == []
    audit = await store.audit.list(target="c1")
    seen = sorted((r.action, r.actor, r.detail["by"], r.detail.get("rule") or "") for r in audit)
    assert seen == sorted(
        [
            ("permission.allow", "policy", "policy", "allow bash git *"),
            ("permission.deny", "policy", "policy", "deny write"),
            ("permission.deny", "key-1", "user", ""),
            ("permission.allow", "key-1", "user", "allow bash make"),  # allow always: the rule it added
            ("permission.deny", "timeout", "timeout", ""),
            ("permission.deny", "policy", "policy", ""),  # the cancel
            ("question.answer", "key-1", "user", ""),
            ("question.answer", "timeout", "timeout", ""),
        ]
    )
    assert all(r.detail.get("turn_id", "t1") == "t1" for r in audit)
    assert "secret-path" not in str([r.detail for r in audit])
