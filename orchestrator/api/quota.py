"""The per-owner sandbox cap, checked before a turn starts so the caller gets a 429 at once."""

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

    def check(
        self,
        spec: SandboxSpec | None,
        *,
        owner: str,
        assistant_id: str,
        chat_id: str,
        workspace_id: str | None,
    ) -> None:
        """Pass when the turn needs no new sandbox, or a new one fits under both caps.

        Raises:
            CapacityError: the turn would create a sandbox past a cap (HTTP 429).
            WorkspaceError: an id cannot form a sandbox name.
        """
        if spec is None:
            return
        registry = self._manager.registry
        if spec.lifecycle is not Lifecycle.ONESHOT:
            identity = identity_for(
                spec.lifecycle,
                owner=owner,
                assistant_id=assistant_id,
                chat_id=chat_id,
                workspace_id=workspace_id,
            )
            if registry.get(identity.name) is not None:
                return  # reused: no new sandbox
        if registry.count() >= self._max_total:
            raise CapacityError("all owners", self._max_total)
        if registry.count(owner) >= self._max_per_owner:
            raise CapacityError(f"owner {owner}", self._max_per_owner)
