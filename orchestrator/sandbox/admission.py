"""`SandboxAdmission`: the sandbox caps (`max_sandboxes`, `max_sandboxes_per_owner`) checked as a
turn is admitted, so the caller gets a 429 at once (`SandboxManager.admit`).

Turns started at the same moment would all pass a check of the boxes that exist (none of theirs
does yet) and then fail one by one inside the turn. So a passing check reserves the sandbox name
it will create until the turn ends; later checks count reserved names that do not exist yet.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from orchestrator.dsl.sandbox import Lifecycle, SandboxSpec
from orchestrator.errors import CapacityError
from orchestrator.sandbox.identity import identity_for
from orchestrator.sandbox.registry import SandboxRegistry


class SandboxAdmission:
    def __init__(self, registry: SandboxRegistry, *, max_total: int, max_per_owner: int) -> None:
        self._registry = registry
        self._max_total = max_total
        self._max_per_owner = max_per_owner
        self._reserved: dict[int, tuple[str, str]] = {}
        self._next = 0

    def _release(self, reservation: int) -> None:
        """Give back what `admit` reserved (when the turn has ended)."""
        self._reserved.pop(reservation, None)

    def _pending(self, owner: str | None = None) -> int:
        registry = self._registry
        names = {
            n for o, n in self._reserved.values() if (owner is None or o == owner) and registry.get(n) is None
        }
        return len(names)

    def admit(
        self,
        spec: SandboxSpec | None,
        *,
        owner: str,
        assistant_id: str,
        session_id: str,
        workspace_id: str | None,
    ) -> Callable[[], None]:
        """Pass when the turn needs no new sandbox, or a new one fits under both caps (counting the
        ones other starting turns reserved); returns what gives the room back at the turn's end.

        Raises:
            CapacityError: the turn would create a sandbox past a cap (HTTP 429).
            WorkspaceError: an id cannot form a sandbox name.
        """
        if spec is None:
            return _nothing
        registry = self._registry
        name: str | None = None
        if spec.lifecycle is not Lifecycle.ONESHOT:
            identity = identity_for(
                spec.lifecycle,
                owner=owner,
                assistant_id=assistant_id,
                session_id=session_id,
                workspace_id=workspace_id,
            )
            name = identity.name
            if registry.get(name) is not None:
                return _nothing  # reused: no new sandbox
            if any(n == name for _, n in self._reserved.values()):
                return _nothing  # another starting turn creates it (its session is busy meanwhile)
        if registry.count() + self._pending() >= self._max_total:
            raise CapacityError("all owners", self._max_total)
        if registry.count(owner) + self._pending(owner) >= self._max_per_owner:
            raise CapacityError(f"owner {owner}", self._max_per_owner)
        if name is None:
            return _nothing  # oneshot boxes have no name before they exist
        self._next += 1
        self._reserved[self._next] = (owner, name)
        return functools.partial(self._release, self._next)


def _nothing() -> None:
    """The release of an admission that reserved nothing."""
