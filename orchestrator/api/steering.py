"""Steering a turn that runs on another replica: interrupts, permission answers, question answers.

With several `cage serve` replicas on one Postgres database, a client may send an interrupt or an
answer to a replica other than the one running its turn. That replica (the sender) writes a
command (`Store.commands`), which wakes every replica; the one holding the session's turn claims it
(one claimant, ever), does exactly what a local request does (the same handle's interrupt, the
same broker's answer, so the same events and audit), and writes the outcome, which wakes the
sender. The sender reports that outcome: success, or the owner's own refusal (no such request
waiting, a question answered as a permission, no running turn), with the same error a local
request gets. A command nobody claims within `CLAIM_WAIT_S` (the turn ended, or its replica died)
is withdrawn and refused as "no turn running". Before sending, the sender asks the database
whether a turn runs in the session at all (its `running` row), so a request for an idle session is
refused at once, as on one process.

SQLite has one process: there `enabled` is False and every request stays local.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog

from orchestrator.errors import CageError, Conflict, Forbidden, NotFound, UsageError
from orchestrator.store import Store
from orchestrator.store.commands import TurnCommand
from orchestrator.store.notify import COMMANDS_CHANNEL, OUTCOMES_CHANNEL

log = structlog.get_logger(__name__)

CLAIM_WAIT_S = 10.0
"""How long a sender waits for the turn's replica to claim its command."""
OUTCOME_WAIT_S = 30.0
"""How long a sender waits for the outcome of a claimed command."""
RECHECK_S = 0.5
"""A waiting sender also reads its command's row this often (an outcome notice may be lost)."""

_ERRORS: dict[str, type[CageError]] = {
    "not_found": NotFound,
    "usage_error": UsageError,
    "conflict": Conflict,
    "forbidden": Forbidden,
}
"""The refusals an owner reports, by name (any other error reads as a conflict)."""


def _error_name(exc: CageError) -> str:
    for name, kind in _ERRORS.items():
        if isinstance(exc, kind):
            return name
    return "conflict"


Act = Callable[[TurnCommand], Awaitable[dict[str, Any]]]
"""Carry out a claimed command on this replica; returns the outcome's data or raises CageError."""


class Steering:
    """Commands to and from the other replicas on this database (Postgres only)."""

    def __init__(self, store: Store, *, holds: Callable[[str], bool], act: Act) -> None:
        self._store = store
        self._holds = holds
        self._act = act
        self.replica = uuid.uuid4().hex
        """Who claims a command here (`turn_commands.claimed_by`)."""
        self._outcomes: dict[int, asyncio.Event] = {}
        self._jobs: set[asyncio.Task[None]] = set()
        self._listening = False

    @property
    def enabled(self) -> bool:
        """True on Postgres, where other replicas may run this database's turns."""
        return self._store.notices.enabled

    def listen(self) -> None:
        """Take commands for the turns this replica runs (call once, in the running loop)."""
        if self._listening or not self.enabled:
            return
        self._listening = True
        self._store.notices.listen(COMMANDS_CHANNEL, self._on_command, on_connect=self._on_connect)
        self._store.notices.listen(OUTCOMES_CHANNEL, self._on_outcome)

    async def running_turn(self, session_id: str) -> str | None:
        """The turn running in `session_id` on any replica (its `running` row); None on SQLite."""
        return (await self.running_turns([session_id])).get(session_id)

    async def running_turns(self, session_ids: Sequence[str]) -> dict[str, str]:
        """`running_turn` of many sessions in one query (sessions with none left out); {} on SQLite."""
        if not self.enabled or not session_ids:
            return {}
        return await self._store.commands.turns_of(session_ids)

    async def send(self, session_id: str, kind: str, body: dict[str, Any], *, refusal: str) -> dict[str, Any]:
        """Have the replica running `session_id`'s turn carry out the command; returns its outcome's
        data.

        Raises:
            NotFound: `refusal`, when no replica holds the turn (none claimed the command in time).
            NotFound, UsageError, Conflict, Forbidden: the owner's refusal, as a local one reads.
            Conflict: the owner claimed the command but reported nothing in time.
        """
        command_id = await self._store.commands.send(session_id, kind, body)
        arrived = self._outcomes.setdefault(command_id, asyncio.Event())
        try:
            outcome = await self._outcome(command_id, arrived, refusal)
        finally:
            self._outcomes.pop(command_id, None)
            await self._store.commands.forget(command_id)
        error = outcome.get("error")
        if error is not None:
            raise _ERRORS.get(str(error), Conflict)(str(outcome.get("message", "")))
        return dict(outcome.get("data") or {})

    async def _outcome(self, command_id: int, arrived: asyncio.Event, refusal: str) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        claim_by = loop.time() + CLAIM_WAIT_S
        give_up = claim_by + OUTCOME_WAIT_S
        while True:
            command = await self._store.commands.get(command_id)
            if command is None:  # swept: cannot happen within the waits, but never hang on it
                return {"error": "not_found", "message": refusal}
            if command.outcome is not None:
                return command.outcome
            now = loop.time()
            if command.claimed_by is None and now >= claim_by:
                gone = {"error": "not_found", "message": refusal}
                if await self._store.commands.withdraw(command_id, gone):
                    return gone
                continue  # claimed meanwhile: its outcome follows
            if now >= give_up:
                return {
                    "error": "conflict",
                    "message": "the replica running this turn took the request but did not report back",
                }
            arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrived.wait(), RECHECK_S)

    def _on_outcome(self, payload: str) -> None:
        if payload.isdigit() and (arrived := self._outcomes.get(int(payload))) is not None:
            arrived.set()

    def _on_command(self, payload: str) -> None:
        if payload.isdigit():
            self._spawn(self._serve(int(payload)))

    def _on_connect(self) -> None:
        """(Re)connected: commands sent while the listener was away wait unclaimed."""
        self._spawn(self._serve_unclaimed())

    def _spawn(self, work: Awaitable[None]) -> None:
        job = asyncio.ensure_future(work)
        self._jobs.add(job)
        job.add_done_callback(self._jobs.discard)

    async def _serve_unclaimed(self) -> None:
        for command in await self._store.commands.unclaimed():
            await self._serve(command.id, command)

    async def _serve(self, command_id: int, command: TurnCommand | None = None) -> None:
        """Claim and carry out the command if this replica holds its session's turn."""
        try:
            if command is None:
                command = await self._store.commands.get(command_id)
            if command is None or command.claimed_by is not None or command.outcome is not None:
                return
            if not self._holds(command.session_id):
                return
            if not await self._store.commands.claim(command_id, self.replica):
                return
            try:
                outcome: dict[str, Any] = {"ok": True, "data": await self._act(command)}
            except CageError as exc:
                outcome = {"error": _error_name(exc), "message": str(exc)}
            await self._store.commands.finish(command_id, outcome)
            log.info(
                "steering.done", session_id=command.session_id, kind=command.kind, error=outcome.get("error")
            )
        except CageError as exc:  # the store failed: the sender's wait ends it
            log.warning("steering.failed", command_id=command_id, error=str(exc))
