"""Sandboxes: the backend protocol, the manager (identity, reuse, locks, caps), reaper, reconcile.

The Docker implementation lives in `orchestrator.sandbox.docker` and is imported explicitly by
whoever builds the app, so that importing this package never imports the docker SDK.
"""

from orchestrator.sandbox.backend import (
    BindMount,
    CreateSpec,
    ExecHandle,
    ExecItem,
    ExecSpec,
    FileEntry,
    PortBinding,
    ResourceLimits,
    ResourceUsage,
    SandboxBackend,
    SandboxInfo,
    SandboxRef,
    SandboxState,
    VolumeMount,
)
from orchestrator.sandbox.framer import LineFramer
from orchestrator.sandbox.identity import SandboxIdentity
from orchestrator.sandbox.manager import ReleaseOutcome, SandboxLease, SandboxManager, SandboxRequest
from orchestrator.sandbox.reaper import ReapAction, Reaper
from orchestrator.sandbox.reconcile import ReconcileReport, reconcile

__all__ = [
    "BindMount",
    "CreateSpec",
    "ExecHandle",
    "ExecItem",
    "ExecSpec",
    "FileEntry",
    "LineFramer",
    "PortBinding",
    "ReapAction",
    "Reaper",
    "ReconcileReport",
    "ReleaseOutcome",
    "ResourceLimits",
    "ResourceUsage",
    "SandboxBackend",
    "SandboxIdentity",
    "SandboxInfo",
    "SandboxLease",
    "SandboxManager",
    "SandboxRef",
    "SandboxRequest",
    "SandboxState",
    "VolumeMount",
    "reconcile",
]
