"""Resource limits and hardening defaults for a sandbox, overridable from `computer` in sandbox.yao.

Capabilities: all are dropped and none is added back. The main process and every exec run as the
non-root `sandbox` user, which needs no capability: the engine switches users before the process
starts, and `kill` of one's own processes is allowed without CAP_KILL. The workspace volume is
handed to `sandbox` by the backend from outside the container (`VolumeMount.owner`), so CHOWN is not
needed either. `no-new-privileges` stops setuid binaries in an image from getting root back.

Network: on the shared network (`Settings.isolated_networks` off), `none` gives the container only
a loopback interface and `bridge` is the engine's NAT network plus `host.docker.internal`. An
isolated sandbox (the setting on, or any egress allowlist) ignores these two fields: the manager
gives it a network of its own behind the egress proxy (`orchestrator.sandbox.network`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.dsl.sandbox import ComputerSpec
from orchestrator.sandbox.backend import PortBinding, ResourceLimits

DEFAULT_MEMORY = 2 * 2**30
SANDBOX_USER = "sandbox"
SANDBOX_UID = 1000
SANDBOX_GID = 1000
TMPFS_OPTIONS = "rw,nosuid,nodev,size=512m"
HOST_ALIAS = "host.docker.internal"
MAIN_COMMAND = ("sh", "-c", "trap 'exit 0' TERM; while :; do sleep 86400 & wait $!; done")
"""The container's main process: idles, and exits at once on SIGTERM (like Yao's)."""


class Hardening(BaseModel):
    """The security-relevant part of a `CreateSpec`, derived from `computer`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    user: str
    limits: ResourceLimits
    cap_drop: tuple[str, ...] = ("ALL",)
    cap_add: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ("no-new-privileges:true",)
    read_only: bool = False
    tmpfs: dict[str, str] = {}
    network: Literal["none", "bridge"] = "bridge"
    runtime: str | None = None
    extra_hosts: dict[str, str] = {}
    ports: tuple[PortBinding, ...] = ()


def hardening(
    computer: ComputerSpec, *, source: Path, default_cpus: float | None = None, disk_bytes: int | None = None
) -> Hardening:
    """Limits and security options for `computer`; `source` names sandbox.yao in errors.

    `default_cpus` applies when `computer.cpus` is unset (a sandbox never gets every host core by
    default); `disk_bytes` bounds the writable layer where the storage driver can.

    Raises:
    """
    limits = ResourceLimits(
        memory_bytes=computer.memory or DEFAULT_MEMORY,
        nano_cpus=round(cpus * 1e9) if (cpus := computer.cpus or default_cpus) else None,
        pids=computer.pids,
        disk_bytes=disk_bytes,
    )
    bridge = computer.network == "bridge"
    return Hardening(
        user=computer.user or SANDBOX_USER,
        limits=limits,
        read_only=computer.read_only,
        tmpfs={"/tmp": TMPFS_OPTIONS} if computer.read_only else {},
        network="bridge" if bridge else "none",  # an allowlist is isolated: see the manager
        runtime=computer.runtime,
        extra_hosts={HOST_ALIAS: "host-gateway"} if bridge else {},
        ports=tuple(
            PortBinding(container_port=p.port, host_port=p.host_port, protocol=p.protocol)
            for p in computer.ports
        )
        if bridge
        else (),
    )
