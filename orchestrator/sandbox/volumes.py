"""Workspace volume GC: remove the workspace volumes nobody has used for `workspace_idle_timeout`.

A volume is collected only when all of these hold, checked under the volume's lock (the same lock
`SandboxManager` holds from creating a volume until a container mounts it):

* it is a Cage workspace volume (`cage.managed`, `cage.volume=workspace`, the manager's
  `extra_labels`): volumes made by earlier versions (no `cage.volume`) are never touched;
* no sandbox in any state mounts it (the engine's own reference count, not Cage's memory);
* no turn acquired or released it for `workspace_idle_timeout` seconds, as this orchestrator
  saw it; a restart starts every clock again (so a GC never acts on less than the full age).

Schedule `collect()` next to the reaper's sweep (`run()` loops on the reaper interval).
"""

from __future__ import annotations

import anyio
import structlog

from orchestrator.errors import SandboxError
from orchestrator.sandbox.labels import MANAGED, OWNER, VOLUME
from orchestrator.sandbox.manager import SandboxManager

log = structlog.get_logger(__name__)


class VolumeCollector:
    """Removes idle workspace volumes of one manager."""

    def __init__(self, manager: SandboxManager, *, idle_timeout: float | None = None) -> None:
        self.manager = manager
        self.idle_timeout = manager.settings.workspace_idle_timeout if idle_timeout is None else idle_timeout

    def _labels(self) -> dict[str, str]:
        return {**self.manager.extra_labels, MANAGED: "true", VOLUME: "workspace"}

    async def collect(self) -> list[str]:
        """One pass; returns the names of the volumes removed."""
        manager, labels = self.manager, self._labels()
        removed: list[str] = []
        for volume in await manager.backend.list_volumes(labels, unused=True):
            if manager.registry.clock() - manager.volume_last_used(volume.name) < self.idle_timeout:
                continue
            async with manager.locks.hold(f"volume:{volume.name}"):
                still = await manager.backend.list_volumes(labels, unused=True)
                idle = manager.registry.clock() - manager.volume_last_used(volume.name) >= self.idle_timeout
                if not idle or all(v.name != volume.name for v in still):
                    continue
                try:
                    await manager.backend.remove_volume(volume.name)
                except SandboxError as exc:  # mounted meanwhile, or the engine refused: next pass
                    log.warning("volume GC could not remove volume", volume=volume.name, error=str(exc))
                    continue
            removed.append(volume.name)
            log.info("idle workspace volume removed", volume=volume.name, owner=volume.labels.get(OWNER))
        return removed

    async def run(self, interval: float | None = None) -> None:
        """Collect forever; a failed pass is logged and the next one retries."""
        every = self.manager.settings.reaper_interval if interval is None else interval
        while True:
            await anyio.sleep(every)
            try:
                await self.collect()
            except SandboxError as exc:
                log.warning("volume GC pass failed", error=str(exc))
