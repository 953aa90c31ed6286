"""The per-owner sandbox cap, checked before a turn starts so the caller gets a 429 at once.

Turns started at the same moment would all pass a check of the boxes that exist (none of theirs
does yet) and then fail one by one inside the turn. So a passing check reserves the sandbox name
it will create until the turn ends; later checks count reserved names that do not exist yet.
"""

from __future__ import annotations

from orchestrator.dsl import Lifecycle, SandboxSpec
from orchestrator.errors import CapacityError
from orchestrator.sandbox import SandboxManager
from orchestrator.sandbox.identity import identity_for


class SandboxQuota:
    def __init__(self, manager: SandboxManager, *, max_total: int, max_per_owner: int) -> None:
        self._manager = manager
        self._max_total = max_total
        self._max_per_owner = max_per_owner
        self._reserved: dict[int, tuple[str, str]] = {}
        self._next = 0

    def release(self, reservation: int | None) -> None:
        """Give back what `check` reserved (when the turn has ended)."""
        if reservation is not None:
            self._reserved.pop(reservation, None)

    def _pending(self, owner: str | None = None) -> int:
        registry = self._manager.registry
        names = {
            n for o, n in self._reserved.values() if (owner is None or o == owner) and registry.get(n) is None
        }
        return len(names)

    def check(
        self,
        spec: SandboxSpec | None,
        *,
        owner: str,
        assistant_id: str,
        chat_id: str,
        workspace_id: str | None,
    ) -> int | None:
        """Pass when the turn needs no new sandbox, or a new one fits under both caps (counting the
        ones other starting turns reserved); returns the reservation to `release` at the turn's end.

        Raises:
            CapacityError: the turn would create a sandbox past a cap (HTTP 429).
            WorkspaceError: an id cannot form a sandbox name.
        """
        if spec is None:
            return None
        registry = self._manager.registry
        name: str | None = None
        if spec.lifecycle is not Lifecycle.ONESHOT:
            identity = identity_for(
                spec.lifecycle,
                owner=owner,
                assistant_id=assistant_id,
                chat_id=chat_id,
                workspace_id=workspace_id,
            )
            name = identity.name
            if registry.get(name) is not None:
                return None  # reused: no new sandbox
            if any(n == name for _, n in self._reserved.values()):
                return None  # another starting turn creates it (its chat is busy meanwhile)
        if registry.count() + self._pending() >= self._max_total:
            raise CapacityError("all owners", self._max_total)
        if registry.count(owner) + self._pending(owner) >= self._max_per_owner:
            raise CapacityError(f"owner {owner}", self._max_per_owner)
        if name is None:
            return None  # oneshot boxes have no name before they exist
        self._next += 1
        self._reserved[self._next] = (owner, name)
        return self._next
