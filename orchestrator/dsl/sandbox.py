"""`sandbox.yao` (version "2.0") as pydantic models.

Yao's keys with their polymorphic forms (`vnc` bool|object, `ports` ints|objects, `secrets`
string|object, `runner.connectors` string|object, `filter.kind` string|list), plus Cage's own
optional keys (`computer.pids`, `network`, `runtime`, `read_only`, `turn_timeout`,
`stall_timeout`, `pool`). Unknown keys are errors: every model forbids extras.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from orchestrator.attribute_docs import describe_fields
from orchestrator.dsl.permissions import PermissionPolicy
from orchestrator.dsl.units import Duration, MemoryBytes

_STRICT = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_RE = re.compile(rf"^(\*\.)?{_LABEL}(\.{_LABEL})*$")


class Lifecycle(enum.StrEnum):
    """How long a sandbox lives and what identifies it (DESIGN.md, "Config hash and identity")."""

    ONESHOT = "oneshot"
    SESSION = "session"
    LONGRUNNING = "longrunning"
    PERSISTENT = "persistent"


DEFAULT_IDLE_TIMEOUT: dict[Lifecycle, timedelta | None] = {
    Lifecycle.ONESHOT: None,
    Lifecycle.SESSION: timedelta(minutes=30),
    Lifecycle.LONGRUNNING: timedelta(hours=2),
    Lifecycle.PERSISTENT: None,
}


class VncSpec(BaseModel):
    model_config = _STRICT
    enabled: bool = False
    view_only: bool = False
    password: str = ""
    """May be `$ENV.NAME`; never logged."""
    resolution: str = ""
    """e.g. `1920x1080`."""

    @model_validator(mode="before")
    @classmethod
    def _from_bool(cls, data: Any) -> Any:
        return {"enabled": data} if isinstance(data, bool) else data

    @field_validator("resolution")
    @classmethod
    def _resolution(cls, v: str) -> str:
        if v and not re.fullmatch(r"\d{2,5}x\d{2,5}(x\d{1,2})?", v):
            raise ValueError(f"resolution must look like 1920x1080, got {v!r}")
        return v


class PortSpec(BaseModel):
    model_config = _STRICT
    port: int = Field(ge=1, le=65535)
    """Port inside the container."""
    host_port: int = Field(default=0, ge=0, le=65535)
    """Host port on 127.0.0.1; 0 picks a free one."""
    protocol: Literal["tcp", "udp"] = "tcp"
    label: str = ""


def _is_port_number(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ports(value: Any) -> Any:
    """`[3000, 8080]` -> port objects. A list mixing both forms is rejected at its first odd element."""
    if not isinstance(value, list | tuple) or not value:
        return value
    first = _is_port_number(value[0])
    for i, v in enumerate(value):
        if _is_port_number(v) != first:
            # A nested ValidationError keeps its location, so the error names `ports[i]`.
            raise ValidationError.from_exception_data(
                "ports",
                [
                    {
                        "type": PydanticCustomError("mixed_ports", "cannot mix ints and objects"),
                        "loc": (i,),
                        "input": v,
                    }
                ],
            )
    return [{"port": v} if _is_port_number(v) else v for v in value]


NEVER_ALLOWED: tuple[str, ...] = ("127.0.0.0/8", "169.254.0.0/16", "::1/128", "fe80::/10")
"""Ranges no allowlist may open: the proxy's own loopback and link-local (cloud metadata)."""


class AllowEntry(BaseModel):
    """One parsed allowlist entry: a host name (maybe `*.`-wildcarded) or an IP network, and a port."""

    model_config = _STRICT
    text: str
    """The entry as written, lower-cased."""
    host: str | None = None
    """A host name without its `*.`; None for an IP entry."""
    wildcard: bool = False
    """`*.example.com`: every subdomain of `host`, not `host` itself."""
    network: str | None = None
    """An IP network (`1.2.3.4/32`, `10.1.0.0/16`) for an IP entry."""
    port: int | None = None
    """None: any port."""


def parse_allow_entry(entry: str) -> AllowEntry:
    """`example.com`, `*.example.com`, `example.com:8443`, `1.2.3.4[:443]` or a CIDR.

    Raises:
        ValueError: not one of those forms, or a range no allowlist may open (`NEVER_ALLOWED`).
    """
    text = entry.strip().lower()
    head, port = text, None
    if text.count(":") == 1:  # host:port or v4:port; IPv6 entries (several colons) take no port
        head, _, port_text = text.partition(":")
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535")
        port = int(port_text)
    try:
        net = ipaddress.ip_network(head, strict=False)
    except ValueError:
        if head == "*" or not _HOST_RE.match(head):
            raise ValueError(f"{entry!r} is not a host name, *.domain, host:port, IP or CIDR") from None
        wildcard = head.startswith("*.")
        return AllowEntry(text=text, host=head.removeprefix("*."), wildcard=wildcard, port=port)
    for never in NEVER_ALLOWED:
        blocked = ipaddress.ip_network(never)
        if net.version == blocked.version and net.overlaps(blocked):
            raise ValueError(
                f"{entry!r}: loopback and link-local addresses (cloud metadata) are never reachable"
            )
    return AllowEntry(text=text, network=str(net), port=port)


class NetworkAllowlist(BaseModel):
    """Egress limited to these destinations; everything else is refused by the egress proxy.

    Entries: `example.com` (that name only), `*.example.com` (its subdomains), `host:port` (that
    port only; without one any port), IPs and CIDRs (raw-IP connections to them).
    """

    model_config = _STRICT
    allow: tuple[str, ...] = Field(min_length=1)

    @field_validator("allow")
    @classmethod
    def _hosts(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        for host in hosts:
            parse_allow_entry(host)
        return hosts


class ComputerSpec(BaseModel):
    model_config = _STRICT
    image: str | None = None
    """Base image for the runner layer, or a ready image that already has the runner CLI."""
    vnc: VncSpec = VncSpec()
    """`true`/`false` or `{enabled, view_only, password, resolution}`."""
    memory: MemoryBytes | None = None
    """Hard memory limit (`docker run --memory`): `2GB`, `512m`, bytes. Default 2 GiB."""
    cpus: float | None = Field(default=None, gt=0, le=256)
    """CPU quota in cores (`--cpus`)."""
    ports: Annotated[tuple[PortSpec, ...], Field(default=())] = ()
    """`[3000, 8080]` or `[{port, host_port, protocol, label}]`; mixing the two forms is an error."""
    user: str | None = None
    """Container user; the runner CLIs always run as the non-root `sandbox` user."""
    work_dir: str = "/workspace"
    """Working directory inside the container."""
    mount_path: str = "/workspace"
    """Where the workspace is mounted."""
    mount_mode: Literal["rw", "ro"] = "rw"
    pids: int = Field(default=512, ge=16, le=1_000_000)
    """Process limit; stops a fork bomb in an agent tool from taking the host down."""
    network: Literal["none", "bridge"] | NetworkAllowlist = "bridge"
    """`none` cuts all egress, `bridge` is the default, `{allow: [...]}` an egress allowlist."""
    runtime: str | None = None
    """OCI runtime, e.g. `runsc` (gVisor); must be configured in the engine."""
    read_only: bool = False
    """Read-only root filesystem with a tmpfs `/tmp`; the workspace stays writable."""

    @field_validator("ports", mode="before")
    @classmethod
    def _ports(cls, value: Any) -> Any:
        return _ports(value)

    @field_validator("work_dir", "mount_path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/") or "/../" in f"{v}/":
            raise ValueError(f"must be an absolute path without '..', got {v!r}")
        return v

    @model_validator(mode="after")
    def _ports_need_a_route(self) -> ComputerSpec:
        # An allowlisted box sits on an internal network: the engine cannot publish ports from it.
        if isinstance(self.network, NetworkAllowlist) and self.ports:
            message = "cannot publish ports from a sandbox with an egress allowlist (its network is internal)"
            raise ValidationError.from_exception_data(
                "ports",
                [{"type": PydanticCustomError("ports_isolated", message), "loc": ("ports",), "input": None}],
            )
        return self


class RoleConnector(BaseModel):
    model_config = _STRICT
    connector: str = Field(min_length=1)
    override: Literal["force", "user"] = "force"

    @model_validator(mode="before")
    @classmethod
    def _from_str(cls, data: Any) -> Any:
        return {"connector": data} if isinstance(data, str) else data


RUNNER_ALIASES = {
    "yao": "yaocode",
    "claude/cli": "claude",
    "claude-code": "claude",
    "opencode-cli": "opencode",
}
KNOWN_RUNNERS = ("claude", "opencode", "codex", "yaocode", "tai")


def canonical_runner(name: str) -> str:
    """Yao's aliases: `yao` -> `yaocode`, `claude/cli` -> `claude`, `x/y` -> `x`."""
    name = RUNNER_ALIASES.get(name, name)
    return name.split("/", 1)[0] if "/" in name else name


class RunnerSpec(BaseModel):
    model_config = _STRICT
    name: str
    """`claude`, `opencode`, `codex`, `yaocode` or `tai` (Yao aliases accepted)."""
    mode: Literal["cli", "service"] = "cli"
    options: dict[str, Any] = Field(default_factory=dict)
    """Runner CLI options (`permission_mode`, `max_turns`, `allowed_tools`, ...)."""
    connectors: dict[Literal["default", "light", "heavy", "vision", "audio"], RoleConnector] = Field(
        default_factory=dict
    )
    """Per-role connectors: `"conn-id"` or `{connector, override: force|user}`."""
    supports: tuple[str, ...] = ()
    """Runners this assistant may run on; empty means all."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        name = canonical_runner(v)
        if name not in KNOWN_RUNNERS:
            raise ValueError(f"unknown runner {v!r}; expected one of {', '.join(KNOWN_RUNNERS)}")
        return name

    @field_validator("supports")
    @classmethod
    def _supports(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        out = tuple(canonical_runner(n) for n in v)
        bad = [n for n in out if n not in KNOWN_RUNNERS]
        if bad:
            raise ValueError(f"unknown runner(s) {', '.join(bad)}; expected {', '.join(KNOWN_RUNNERS)}")
        return out


class _Step(BaseModel):
    model_config = _STRICT
    once: bool = False
    """Run only when the config hash changed since the last successful prepare."""
    ignore_error: bool = False
    """A failure is logged and the next step runs."""


class FileStep(_Step):
    """Write `content` to `path` (relative to the workspace; `~/` means the workspace root)."""

    action: Literal["file"]
    path: str = Field(min_length=1)
    content: str = ""
    mode: int = Field(default=0o644, ge=0, le=0o777)


class CopyStep(_Step):
    """Copy `src` (relative to the assistant directory) to `dst` (relative to the workspace)."""

    action: Literal["copy"]
    src: str = Field(min_length=1)
    dst: str = Field(min_length=1)


class ExecStep(_Step):
    """Run `cmd` with `sh -c` in the work dir; `background` detaches it."""

    action: Literal["exec"]
    cmd: str = Field(min_length=1)
    background: bool = False
    timeout: Duration | None = None
    """Kill the step after this long (default: no limit besides the turn's)."""


PrepareStep = Annotated[FileStep | CopyStep | ExecStep, Field(discriminator="action")]


class SecretEntry(BaseModel):
    """Metadata for a secret; `value` may be `$ENV.NAME`. Values are never logged or labelled."""

    model_config = _STRICT
    value: str = ""
    label: str = ""
    description: str = ""
    required: bool = False
    multiline: bool = False
    env: str | None = None
    """Inject the value into execs under this variable name (Cage extension; Yao never injects)."""

    @model_validator(mode="before")
    @classmethod
    def _from_str(cls, data: Any) -> Any:
        return {"value": data} if isinstance(data, str) else data


class ComputerFilter(BaseModel):
    model_config = _STRICT
    kind: tuple[Literal["box", "host"], ...] = ()
    image: str = ""
    vnc: bool | None = None
    os: str = ""
    arch: str = ""
    min_cpus: float = Field(default=0, ge=0)
    min_mem: MemoryBytes | None = None
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


class PoolSpec(BaseModel):
    """`pool`: warm boxes kept started for this assistant (Cage extension, `oneshot` only).

    A pooled box is made ahead for one owner's workspace and config hash, so that owner's next
    turn claims it instead of creating one (`orchestrator.sandbox.pool`)."""

    model_config = _STRICT
    size: int = Field(ge=0, le=16)
    """Started, unclaimed boxes kept per owner and workspace (0: none; `CAGE_POOL_SIZE` when unset)."""


class SandboxSpec(BaseModel):
    """The whole of `sandbox.yao`."""

    model_config = _STRICT
    version: Literal["2.0"]
    """Must be "2.0" (Sandbox V2)."""
    computer: ComputerSpec = ComputerSpec()
    runner: RunnerSpec
    lifecycle: Lifecycle = Lifecycle.ONESHOT
    """`oneshot` (default, also for an empty value) | `session` | `longrunning` | `persistent`."""
    idle_timeout: Duration | None = None
    """Default: session 30m, longrunning 2h, others never."""
    max_lifetime: Duration | None = None
    """Remove a longrunning box older than this."""
    stop_timeout: Duration = timedelta(seconds=2)
    """Grace period between SIGTERM and SIGKILL."""
    prepare: tuple[PrepareStep, ...] = ()
    environment: dict[str, str] = Field(default_factory=dict)
    """Container environment; values support `$ENV.NAME`."""
    secrets: dict[str, SecretEntry] = Field(default_factory=dict)
    filter: ComputerFilter | None = None
    turn_timeout: Duration | None = None
    """Cancel a turn that runs longer than this."""
    stall_timeout: Duration | None = None
    """Emit `turn/stalled` and cancel when the runner prints nothing for this long."""
    permissions: PermissionPolicy = PermissionPolicy()
    """Who decides tool calls: `{mode: bypass|ask|deny, timeout, default, rules}` (default bypass)."""
    pool: PoolSpec | None = None
    """Warm boxes for this assistant's `oneshot` turns (`{size: N}`); unset: `CAGE_POOL_SIZE`."""

    @field_validator("lifecycle", mode="before")
    @classmethod
    def _lifecycle(cls, v: Any) -> Any:
        return Lifecycle.ONESHOT if v in ("", None) else v

    @field_validator("pool")
    @classmethod
    def _pool_oneshot(cls, pool: PoolSpec | None, info: ValidationInfo) -> PoolSpec | None:
        lifecycle = info.data.get("lifecycle")
        if pool is not None and pool.size and lifecycle is not None and lifecycle is not Lifecycle.ONESHOT:
            raise ValueError(
                f"a pool serves only lifecycle oneshot (a {lifecycle.value} box is kept and reused); "
                "remove `pool` or set its size to 0"
            )
        return pool

    @field_validator("environment")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for name in env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"invalid environment variable name {name!r}")
        return env

    def effective_idle_timeout(self) -> timedelta | None:
        """`idle_timeout` or the lifecycle's default (session 30m, longrunning 2h)."""
        return self.idle_timeout if self.idle_timeout is not None else DEFAULT_IDLE_TIMEOUT[self.lifecycle]
