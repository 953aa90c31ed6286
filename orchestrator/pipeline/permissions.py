"""The permission broker: one per call, the `PermissionGate` every runner and the native loop ask.

A tool call is decided by the assistant's `permissions` policy (`sandbox.yao`) at once, or put to
the client: a `permission/request` event, then a wait (holding no lock) for the client's answer
(`PendingAnswers`) until the policy's deadline, then a `permission/resolved` event. To keep
streams small, decisions by rule are reported only when they deny (`permission/resolved`,
`by: policy`, with no request before it); allowed calls show as their tool events. CI mode
(`cage run --permissions`) reports every decision.

"Allow always" adds a rule for the rest of the session (first among the rules), kept in the
session's metadata (`SESSION_RULES_KEY`) so the next turn has it too. Every decision goes to the
audit log (`permission.allow` / `permission.deny`, `question.answer`), with the tool and the
rule, never the command or path (they may hold secrets).

A cancelled wait (the turn interrupted) resolves the request as denied before it unwinds.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import anyio
import structlog
from pydantic import JsonValue, ValidationError

from orchestrator.dsl.permissions import PermissionPolicy, PermissionRule
from orchestrator.errors import CageError, ProtocolError
from orchestrator.permissions import Decision, Question, ToolRequest
from orchestrator.permissions.rules import WORKSPACE, always_rule, verdict
from orchestrator.pipeline.permission_answers import (
    Answer,
    InProcessAnswers,
    PendingAnswers,
    PermissionAnswer,
)
from orchestrator.redaction import redact
from orchestrator.store import Store
from orchestrator.stream import Emit, Event, TurnBuilder

log = structlog.get_logger(__name__)

Unattended = Literal["policy", "deny", "allow"]
"""CI mode: who answers an `ask` with no human there: the policy's `default`, or always deny/allow."""
SESSION_RULES_KEY = "cage.permissions.allow"
"""Session metadata key holding the session's "allow always" rules (`[{tool, subject}]`)."""
MAX_INPUT_TEXT = 2000
CANCELLED = "refused: the turn ended before the request was answered"


def session_rules(metadata: Mapping[str, Any]) -> tuple[PermissionRule, ...]:
    """The "allow always" rules kept in a session's metadata (malformed entries are skipped)."""
    raw = metadata.get(SESSION_RULES_KEY)
    if not isinstance(raw, list):
        return ()
    rules: list[PermissionRule] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        try:
            rules.append(PermissionRule(action="allow", tool=item.get("tool"), subject=item.get("subject")))
        except ValidationError:
            log.warning("permissions.bad_session_rule")
    return tuple(rules)


def _short(value: Any) -> JsonValue:
    """The tool input for the event: long strings shortened, secrets redacted."""
    if isinstance(value, str):
        text = redact(value)
        return text if len(text) <= MAX_INPUT_TEXT else text[: MAX_INPUT_TEXT - 3] + "..."
    if isinstance(value, Mapping):
        return {str(k): _short(v) for k, v in list(value.items())[:50]}
    if isinstance(value, list | tuple):
        return [_short(v) for v in list(value)[:50]]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _short(str(value))


def _deadline(timeout: timedelta) -> str:
    return (datetime.now(UTC) + timeout).isoformat(timespec="seconds").replace("+00:00", "Z")


class PermissionBroker:
    """`PermissionGate` of one call (turn or nested call) of one session."""

    def __init__(
        self,
        policy: PermissionPolicy,
        *,
        session_id: str,
        turn_id: str,
        builder: TurnBuilder,
        emit: Emit,
        answers: PendingAnswers,
        store: Store | None = None,
        rules: Sequence[PermissionRule] = (),
        unattended: Unattended | None = None,
        workspace: str = WORKSPACE,
    ) -> None:
        self.policy = policy
        self.session_id = session_id
        self.turn_id = turn_id
        self._builder = builder
        self._emit = emit
        self._answers = answers
        self._store = store
        self._session_rules: list[PermissionRule] = list(rules)
        self.unattended = unattended
        self._workspace = workspace
        self._lock = anyio.Lock()
        """Serialises building and emitting this broker's events (never held while waiting)."""
        self.waiting = 0
        """Requests put to the client and not decided yet (a stall clock pauses meanwhile)."""
        self.decisions: list[Decision] = []

    @property
    def asks(self) -> bool:
        return self.policy.asks

    @property
    def session_rules(self) -> tuple[PermissionRule, ...]:
        return tuple(self._session_rules)

    # -- PermissionGate ------------------------------------------------------------------------

    async def check(self, request: ToolRequest) -> Decision:
        found = verdict(self.policy, request, extra=tuple(self._session_rules), workspace=self._workspace)
        rule = found.rule_text
        if found.action == "allow":
            decision = Decision(allow=True, by="policy", rule=rule)
            # CI mode reports every decision of a policy; with none (`bypass`, no rules) there is
            # nothing to report, as runners that never ask report nothing
            if self.unattended is not None and self.asks:
                await self._resolved(self._new_id("perm"), request, decision)
            return await self._record(request, decision)
        if found.action == "deny":
            why = f"rule {rule!r}" if rule else "mode deny"
            decision = Decision(
                allow=False, by="policy", message=f"refused by the permissions policy ({why})", rule=rule
            )
            await self._resolved(self._new_id("perm"), request, decision)
            return await self._record(request, decision)
        return await self._ask_client(request, rule)

    async def ask(self, question: Question) -> str:
        request_id = self._new_id("q")
        if self.unattended is not None:
            await self._send(
                lambda: [
                    *self._builder.question(
                        request_id, question.text, options=question.options, tool_id=question.call_id
                    ),
                    *self._builder.question_answered(request_id, "", by="policy"),
                ]
            )
            await self._audit("question.answer", {"request_id": request_id, "by": "policy"}, "policy")
            return ""
        deadline = _deadline(self.policy.timeout)
        waiter = self._answers.register(self.session_id, request_id, "question")
        answer: Answer | None = None
        timed_out = False
        try:
            await self._send(
                lambda: self._builder.question(
                    request_id,
                    question.text,
                    options=question.options,
                    tool_id=question.call_id,
                    deadline=deadline,
                )
            )
            self.waiting += 1
            try:
                with anyio.move_on_after(self.policy.timeout.total_seconds()) as scope:
                    await waiter.answered.wait()
                timed_out = scope.cancelled_caught
            finally:
                self.waiting -= 1
            answer = waiter.answer
        finally:
            self._answers.withdraw(self.session_id, request_id)
            with anyio.CancelScope(shield=True):
                by: Literal["user", "timeout", "policy"] = (
                    "user" if answer is not None else ("timeout" if timed_out else "policy")
                )
                text = answer.text if answer is not None else ""
                await self._send(lambda: self._builder.question_answered(request_id, text, by=by))
                actor = answer.actor if answer is not None else by
                await self._audit("question.answer", {"request_id": request_id, "by": by}, actor)
        return answer.text if answer is not None else ""

    # -- asking the client -----------------------------------------------------------------------

    async def _ask_client(self, request: ToolRequest, rule: str | None) -> Decision:
        request_id = self._new_id("perm")
        if self.unattended is not None:
            allow = {"allow": True, "deny": False, "policy": self.policy.default == "allow"}[self.unattended]
            source = (
                "the policy's default" if self.unattended == "policy" else f"--permissions {self.unattended}"
            )
            unattended = Decision(
                allow=allow,
                by="policy",
                message="" if allow else f"refused: no one to ask in CI mode ({source})",
                rule=rule,
            )
            await self._send(lambda: self._request_events(request_id, request, rule, None))
            await self._resolved(request_id, request, unattended)
            return await self._record(request, unattended)
        deadline = _deadline(self.policy.timeout)
        waiter = self._answers.register(self.session_id, request_id, "permission")
        decision: Decision | None = None
        always = False
        try:
            await self._send(lambda: self._request_events(request_id, request, rule, deadline))
            self.waiting += 1
            try:
                with anyio.move_on_after(self.policy.timeout.total_seconds()):
                    await waiter.answered.wait()
            finally:
                self.waiting -= 1
            answer = waiter.answer
            if answer is None:
                allow = self.policy.default == "allow"
                timeout = self.policy.timeout
                decision = Decision(
                    allow=allow,
                    by="timeout",
                    message="" if allow else f"refused: no answer within {_seconds(timeout)} (the default)",
                    rule=rule,
                )
            else:
                allow = answer.decision in ("allow", "allow_always")
                always = answer.decision == "allow_always"
                added = await self._allow_always(request) if always else None
                decision = Decision(
                    allow=allow,
                    by="user",
                    message=""
                    if allow
                    else (
                        f"refused by the user: {answer.message}" if answer.message else "refused by the user"
                    ),
                    rule=added.text() if added is not None else rule,
                )
        finally:
            self._answers.withdraw(self.session_id, request_id)
            if decision is None:  # cancelled while waiting: resolve it before unwinding
                with anyio.CancelScope(shield=True):
                    cancelled = Decision(allow=False, by="policy", message=CANCELLED, rule=rule)
                    await self._resolved(request_id, request, cancelled)
                    await self._record(request, cancelled)
        actor = waiter.answer.actor if waiter.answer is not None else decision.by
        await self._resolved(request_id, request, decision, always=always)
        return await self._record(request, decision, actor=actor)

    async def _allow_always(self, request: ToolRequest) -> PermissionRule:
        rule = always_rule(request)
        self._session_rules.insert(0, rule)
        if self._store is not None:
            kept: list[JsonValue] = [{"tool": r.tool, "subject": r.subject} for r in self._session_rules]
            try:
                await self._store.sessions.update(self.session_id, metadata={SESSION_RULES_KEY: kept})
            except CageError as exc:  # the rule holds for this turn; the next one asks again
                log.warning("permissions.session_rule_not_saved", session_id=self.session_id, error=str(exc))
        return rule

    # -- events, audit ---------------------------------------------------------------------------

    def _request_events(
        self, request_id: str, request: ToolRequest, rule: str | None, deadline: str | None
    ) -> list[Event]:
        reason = f"rule {rule!r} asks" if rule else "the policy asks for every call no rule decides"
        return self._builder.permission_request(
            request_id,
            request.tool,
            tool_id=request.call_id,
            input=_short(dict(request.input)),
            reason=reason,
            rule=rule,
            deadline=deadline,
        )

    async def _resolved(
        self, request_id: str, request: ToolRequest, decision: Decision, *, always: bool = False
    ) -> None:
        await self._send(
            lambda: self._builder.permission_resolved(
                request_id,
                "allow" if decision.allow else "deny",
                by=decision.by,
                message=decision.message or None,
                tool=request.tool,
                tool_id=request.call_id,
                rule=decision.rule,
                always=always,
            )
        )

    async def _send(self, make: Callable[[], Sequence[Event]]) -> None:
        async with self._lock:
            try:
                events = make()
            except ProtocolError:  # the call's stream ended already (cancelled around us)
                return
            await self._emit(events)

    async def _record(
        self, request: ToolRequest, decision: Decision, *, actor: str | None = None
    ) -> Decision:
        self.decisions.append(decision)
        detail: dict[str, JsonValue] = {
            "turn_id": self.turn_id,
            "tool": request.tool,
            "runner": request.runner,
            "by": decision.by,
            "rule": decision.rule,
        }
        await self._audit(
            "permission.allow" if decision.allow else "permission.deny", detail, actor or decision.by
        )
        return decision

    async def _audit(self, action: str, detail: dict[str, JsonValue], actor: str) -> None:
        if self._store is None:
            return
        try:
            with anyio.CancelScope(shield=True):
                await self._store.audit.record(actor, action, self.session_id, detail)
        except CageError as exc:
            log.warning("permissions.audit_failed", session_id=self.session_id, error=str(exc))

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{secrets.token_hex(6)}"


def _seconds(value: timedelta) -> str:
    total = value.total_seconds()
    return f"{total / 60:g}m" if total >= 60 and total % 60 == 0 else f"{total:g}s"


class Permissions:
    """The pipeline's permission desk: makes each call's broker and takes the clients' answers."""

    def __init__(
        self,
        store: Store | None = None,
        *,
        answers: PendingAnswers | None = None,
        unattended: Unattended | None = None,
    ) -> None:
        self.store = store
        self.answers: PendingAnswers = answers or InProcessAnswers()
        self.unattended = unattended

    async def broker(
        self,
        policy: PermissionPolicy,
        *,
        session_id: str,
        turn_id: str,
        builder: TurnBuilder,
        emit: Emit,
        workspace: str = WORKSPACE,
        unattended: Unattended | None = None,
    ) -> PermissionBroker:
        """A broker for one call; the session's "allow always" rules are loaded when it asks."""
        rules: tuple[PermissionRule, ...] = ()
        if policy.asks and self.store is not None:
            session = await self.store.sessions.get(session_id)
            rules = session_rules(session.metadata) if session is not None else ()
        return PermissionBroker(
            policy,
            session_id=session_id,
            turn_id=turn_id,
            builder=builder,
            emit=emit,
            answers=self.answers,
            store=self.store,
            rules=rules,
            unattended=unattended or self.unattended,
            workspace=workspace,
        )

    async def respond_permission(
        self,
        session_id: str,
        request_id: str,
        decision: PermissionAnswer,
        message: str | None,
        *,
        actor: str = "user",
    ) -> None:
        """Raises: NotFound (no such request waiting), UsageError (it is a question)."""
        await self.answers.deliver(
            session_id, request_id, "permission", Answer(decision=decision, message=message, actor=actor)
        )

    async def respond_question(
        self, session_id: str, request_id: str, text: str, *, actor: str = "user"
    ) -> None:
        """Raises: NotFound (no such question waiting), UsageError (it is a permission request)."""
        await self.answers.deliver(session_id, request_id, "question", Answer(text=text, actor=actor))
