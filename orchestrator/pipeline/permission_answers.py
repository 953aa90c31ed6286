"""Where a waiting permission request or question gets its answer from a client.

The broker registers each request it puts to a client and waits on it; the API delivers the
answer by session and request id. `PendingAnswers` is the interface: today one process holds the
waiters (`InProcessAnswers`); with several replicas (issue 20) another implementation can take
an answer on any replica and hand it over through the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

import anyio

from orchestrator.errors import NotFound, UsageError

AnswerKind = Literal["permission", "question"]
PermissionAnswer = Literal["allow", "deny", "allow_always"]


@dataclass(frozen=True, slots=True)
class Answer:
    """A client's answer: a decision for a permission request, a text for a question."""

    decision: PermissionAnswer | None = None
    text: str = ""
    message: str | None = None
    """The user's words to the agent with a denial."""
    actor: str = "user"
    """Who answered (the API key id), for the audit log."""


@dataclass
class Waiter:
    """One request waiting for its answer; `answered` is set once `answer` is there."""

    kind: AnswerKind
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Answer | None = None


class PendingAnswers(Protocol):
    def register(self, session_id: str, request_id: str, kind: AnswerKind) -> Waiter:
        """Open a request; its answer arrives on the returned waiter."""
        ...

    def withdraw(self, session_id: str, request_id: str) -> None:
        """The request is decided (answered, timed out, cancelled): later answers are refused."""
        ...

    async def deliver(self, session_id: str, request_id: str, kind: AnswerKind, answer: Answer) -> None:
        """Hand `answer` to the waiting request.

        Raises:
            NotFound: no such request is waiting in this session (never asked, answered, expired).
            UsageError: the request is of the other kind (a question answered as a permission).
        """
        ...


class InProcessAnswers:
    """`PendingAnswers` for one process: waiters in a dict, no lock held while anyone waits."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], Waiter] = {}

    def register(self, session_id: str, request_id: str, kind: AnswerKind) -> Waiter:
        waiter = Waiter(kind)
        self._waiting[(session_id, request_id)] = waiter
        return waiter

    def withdraw(self, session_id: str, request_id: str) -> None:
        self._waiting.pop((session_id, request_id), None)

    def waiting(self, session_id: str) -> list[str]:
        """The request ids waiting in `session_id` (tests, the admin view)."""
        return [rid for (cid, rid) in self._waiting if cid == session_id]

    async def deliver(self, session_id: str, request_id: str, kind: AnswerKind, answer: Answer) -> None:
        waiter = self._waiting.get((session_id, request_id))
        noun = "permission request" if kind == "permission" else "question"
        if waiter is None or waiter.answer is not None:
            raise NotFound(
                f"no {noun} {request_id!r} is waiting in this session (never asked, answered or expired)"
            )
        if waiter.kind != kind:
            other = "a permission request" if waiter.kind == "permission" else "a question"
            raise UsageError(f"{request_id!r} is {other}; answer it with its own frame or route")
        waiter.answer = answer
        waiter.answered.set()
