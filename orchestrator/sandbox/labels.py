"""The `cage.*` labels every managed sandbox carries, and reading them back (reconcile).

Labels hold ids, the lifecycle, the config hash and timeouts: never a secret, never an
environment value.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.sandbox.identity import SandboxIdentity

MANAGED = "cage.managed"
SANDBOX = "cage.sandbox"
OWNER = "cage.owner"
ASSISTANT = "cage.assistant"
LIFECYCLE = "cage.lifecycle"
CONFIG_HASH = "cage.config-hash"
WORKSPACE = "cage.workspace"
SESSION = "cage.session"
LEGACY_SESSION = "cage.chat"
"""The session label's name on boxes and volumes made before 2026-12: read (`session_label`), never
written, so those are still adopted, matched and reaped."""
IDLE_TIMEOUT = "cage.idle-timeout"
MAX_LIFETIME = "cage.max-lifetime"
STOP_TIMEOUT = "cage.stop-timeout"
"""The box's SIGTERM-to-SIGKILL grace (`stop_timeout`), so a box adopted after a restart keeps it."""
VOLUME = "cage.volume"
"""Set on workspace volumes (value `workspace`), with the owner and scope labels."""
HELPER = "cage.helper"
"""Set on short-lived helper containers (volume initialisation); they are never adopted."""
RUN = "cage.run"
"""Set by `cage run` (a CI job) on its boxes, with its run id: that process removes them as it
ends, so a server's reconcile leaves them alone (unless `STALE_RUN_AFTER` old: a killed job's)."""
STALE_RUN_AFTER = 24 * 3600.0


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def session_label(labels: Mapping[str, str]) -> str | None:
    """The session id a box or volume is labelled with, under the label's current or old name."""
    return labels.get(SESSION) or labels.get(LEGACY_SESSION) or None


def sandbox_labels(
    identity: SandboxIdentity,
    *,
    config_hash: str,
    idle_timeout: float | None,
    max_lifetime: float | None,
    stop_timeout: float | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """All labels of a sandbox; `extra` (deployment or test-run labels) cannot override Cage's own."""
    labels = dict(extra or {})
    labels.update(
        {
            MANAGED: "true",
            SANDBOX: identity.name,
            OWNER: identity.owner,
            ASSISTANT: identity.assistant_id,
            LIFECYCLE: identity.lifecycle.value,
            CONFIG_HASH: config_hash,
            WORKSPACE: identity.workspace_id,
            IDLE_TIMEOUT: _seconds(idle_timeout),
            MAX_LIFETIME: _seconds(max_lifetime),
            STOP_TIMEOUT: _seconds(stop_timeout),
        }
    )
    if identity.session_id:
        labels[SESSION] = identity.session_id
    return labels


class SandboxLabels(BaseModel):
    """The labels of a managed sandbox, read back."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    owner: str
    assistant_id: str
    lifecycle: Lifecycle
    config_hash: str
    workspace_id: str
    session_id: str | None = None
    idle_timeout: float | None = None
    max_lifetime: float | None = None
    stop_timeout: float | None = None

    @classmethod
    def parse(cls, labels: Mapping[str, str]) -> SandboxLabels | None:
        """None when the labels are not a complete, valid Cage label set (or mark a helper)."""
        if labels.get(MANAGED) != "true" or HELPER in labels:
            return None
        try:
            return cls(
                name=labels[SANDBOX],
                owner=labels[OWNER],
                assistant_id=labels[ASSISTANT],
                lifecycle=Lifecycle(labels[LIFECYCLE]),
                config_hash=labels[CONFIG_HASH],
                workspace_id=labels[WORKSPACE],
                session_id=session_label(labels),
                idle_timeout=float(labels[IDLE_TIMEOUT]) if labels.get(IDLE_TIMEOUT) else None,
                max_lifetime=float(labels[MAX_LIFETIME]) if labels.get(MAX_LIFETIME) else None,
                stop_timeout=float(labels[STOP_TIMEOUT]) if labels.get(STOP_TIMEOUT) else None,
            )
        except (KeyError, ValueError, ValidationError):
            return None
