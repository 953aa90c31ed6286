"""Process-wide settings, read from `CAGE_*` environment variables (and CLI flags that set them)."""

from __future__ import annotations

from ipaddress import IPv4Network
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.attribute_docs import describe_fields

SYSTEM_CA_BUNDLES = (
    Path("/etc/ssl/certs/ca-certificates.crt"),  # Debian, Ubuntu, Alpine
    Path("/etc/pki/tls/certs/ca-bundle.crt"),  # Fedora, RHEL
)


def _system_ca_bundle() -> Path | None:
    return next((p for p in SYSTEM_CA_BUNDLES if p.is_file()), None)


class Settings(BaseSettings):
    """Embedded defaults: SQLite under `<app_dir>/.cage/`, the local Docker engine, the app in the cwd."""

    model_config = SettingsConfigDict(env_prefix="CAGE_", extra="ignore", json_schema_extra=describe_fields)

    app_dir: Path = Field(default_factory=Path.cwd)
    """The application directory: `assistants/`, `connectors/`, `agent.yml`."""
    data_dir: Path = Path(".cage")
    """Where the SQLite file, checkpoints and local state live; unset, `<app_dir>/.cage` (never the cwd)."""
    database_url: str | None = None
    """SQLAlchemy URL; None means `sqlite+aiosqlite:///<data_dir>/cage.db`."""
    docker_host: str | None = None
    """Engine URL; None means DOCKER_HOST or the local socket."""
    base_image: str = "cage/base:bookworm"
    """Base image every runner image builds FROM (`debian:bookworm-slim` where pulls work)."""
    extra_ca_certs: Path | None = Field(default_factory=lambda: _system_ca_bundle())
    """A PEM bundle installed into runner images at build time (networks with TLS inspection).

    Unset, the host's system bundle where there is one, so an image built by `make` and one built
    by a direct `cage` call get the same hash; `CAGE_EXTRA_CA_CERTS=""` installs none."""
    max_line_bytes: int = 64 * 2**20
    """Longest single output line a runner may print; longer lines become an `error` event."""
    stderr_keep_bytes: int = 64 * 2**10
    """Bytes of exec stderr kept in memory (half head, half tail)."""
    max_streams: int = 200
    """Concurrent exec streams (each holds one worker thread)."""
    max_sandboxes: int = 100
    """Sandboxes alive at once, all owners together."""
    max_sandboxes_per_owner: int = 10
    """Sandboxes alive at once for one owner."""
    sandbox_labels: dict[str, str] = Field(default_factory=dict)
    """Extra labels on every sandbox and volume (JSON in `CAGE_SANDBOX_LABELS`), e.g. a deployment id."""
    reaper_interval: float = 30.0
    """Seconds between two reaper sweeps."""
    replica_lease_seconds: float = Field(default=30.0, gt=0)
    """Seconds a replica (and the turns it runs) stays alive to the others without a heartbeat; then
    another replica closes its turns as after a crash (`docs/deploy.md`, "Several replicas")."""
    replica_heartbeat_seconds: float = Field(default=10.0, gt=0)
    """Seconds between two heartbeats of a replica: renews its leases, elects the leader; below the lease."""
    pool_size: int = Field(default=0, ge=0, le=16)
    """Warm boxes per owner and workspace for `oneshot` assistants whose sandbox.yao sets no `pool`
    (`cage serve` only; `cage run` never pools)."""
    pool_max: int = Field(default=16, ge=0)
    """Warm, unclaimed boxes alive at once, all assistants and owners together."""
    pool_idle: float = Field(default=600.0, gt=0)
    """Seconds an unclaimed warm box may wait before the reaper removes it."""
    turn_gate_delay: float = Field(default=0.0012, gt=0)
    """Seconds events may take on average from their stamp to their clients' connections (or 1.5
    times the lowest such mean of late, if more) before a server admits fewer root turns at once; the
    others wait at the door, so the events of the turns running reach their clients in milliseconds
    (`docs/performance.md`, "Events under load")."""
    turn_gate_floor: int = Field(default=2, ge=1)
    """Root turns a server always admits at once, however late its events are."""
    turn_gate_wait: float = Field(default=60.0, gt=0)
    """Seconds a root turn may wait at a saturated server's door; then it is refused (429 `server_busy`)."""
    acquire_timeout: float = Field(default=900.0, gt=0)
    """Seconds a sandbox may take to be ready (image build + prepare steps); then the turn fails."""
    max_workspace_volumes_per_owner: int = Field(default=200, ge=1)
    """Workspace volumes one owner may have (a `session` assistant makes one per session); then 429."""
    workspace_idle_timeout: float = Field(default=14 * 86400.0, gt=0)
    """Seconds a workspace volume no sandbox uses may stay before the volume GC removes it."""
    default_cpus: float = Field(default=2.0, gt=0)
    """CPU cores a sandbox gets when its `computer.cpus` is not set."""
    sandbox_disk: int | None = Field(default=None, gt=0)
    """Bytes of writable container layer per sandbox where the storage driver can enforce it."""
    workspace_tmpfs_bytes: int | None = Field(default=None, gt=0)
    """When set, workspaces are size-bounded tmpfs volumes (lost when no sandbox mounts them)."""
    assistant_cache_size: int = 256
    """Loaded assistants kept in the LRU cache."""
    log_level: str = "WARNING"
    """The one default for every command; the server image and compose file set INFO."""
    host: str = "127.0.0.1"
    port: int = 8080
    auth: str = "on"
    """`off` disables API-key checks: local development only, logged loudly."""
    api_assistant_env_prefix: str | None = None
    """`$ENV.` in API-created assistants reads only variables with this prefix (none: no variable)."""
    bootstrap_admin_key: str | None = None
    """An admin API key accepted on first start, before any key was created."""
    isolated_networks: bool = True
    """Every sandbox on a network of its own behind the egress proxy (allowlists always are); off puts
    `none`/`bridge` boxes on the engine's shared bridge with `host.docker.internal` (no policy)."""
    namespace_egress: bool = True
    """Docker: an isolated box that publishes no ports gets no network interface at all, and this
    process serves its way to the proxy from inside its namespace (`sandbox/docker/netns.py`);
    used when this process can (root, the engine on this host). Off: every isolated box gets a
    network of its own."""
    egress_container: str = "cage-egress"
    """Name of the shared egress proxy container."""
    egress_network: str = "bridge"
    """Network through which the proxy reaches the outside and the gateway (compose: its network)."""
    egress_subnet_pool: IPv4Network = IPv4Network("10.213.0.0/16")
    """Where the /28 subnets of sandbox networks come from; must not overlap the host's networks."""
    egress_hosts: dict[str, str] = Field(default_factory=dict)
    """Extra name -> address entries only the proxy resolves (JSON; `host-gateway` is the host)."""
    gateway_relay_host: str = "host.docker.internal"
    """Where the proxy's `cage-gateway` relay finds the gateway (compose: the orchestrator service)."""
    gateway_host: str = ""
    """Address the model gateway binds; empty: Docker's bridge (`docker0`) if present, else 0.0.0.0."""
    gateway_port: int = 0
    """Port of the model gateway; 0 picks a free one (read it from `ModelGateway.address`)."""
    gateway_token_ttl: float = 24 * 3600.0
    """Seconds a per-turn gateway token lives at most (it is revoked when its turn ends anyway)."""
    allow_host_mcp: bool = False
    """Let LLM-mode assistants start stdio MCP servers on the orchestrator host (trusted apps only)."""
    backend: Literal["docker", "kubernetes"] = "docker"
    """Sandbox backend: the local Docker engine, or pods in a Kubernetes namespace (`docs/deploy.md`)."""
    k8s_namespace: str = "cage"
    """Namespace of the sandbox pods, PVCs and NetworkPolicies (in-cluster: the pod's own if unset)."""
    k8s_kubeconfig: Path | None = None
    """Kubeconfig file; None: `KUBECONFIG`/`~/.kube/config`, or the in-cluster service account."""
    k8s_context: str | None = None
    """Kubeconfig context; None: its current context."""
    k8s_registry: str = ""
    """Registry the cluster pulls runner images from (`cage images push` pushes there): `host:5000/cage`."""
    k8s_runtime_class: str | None = None
    """`runtimeClassName` of sandbox pods (`gvisor`, `kata`); None: the cluster's default runtime."""
    k8s_storage_class: str | None = None
    """StorageClass of workspace PVCs; None: the cluster's default."""
    k8s_workspace_size: str = "10Gi"
    """Requested size of a workspace PVC."""
    k8s_run_as_user: int = Field(default=1000, ge=1)
    """uid (and gid) of sandbox pods when the spec names its user by name (runner images: `sandbox`, 1000)."""
    k8s_image_pull_secret: str | None = None
    """Secret the sandbox pods pull images with (a private registry)."""
    k8s_images_manifest: Path | None = None
    """JSON file `cage images push --manifest` wrote: the base image ids the runner image tags are
    computed from on Kubernetes (no Docker engine there). Required with `backend=kubernetes`."""
    k8s_registry_auth_file: Path | None = None
    """Docker config JSON (`.dockerconfigjson` of a pull Secret) with the registry's credentials,
    used to look the runner images up; None: anonymous."""
    k8s_registry_plain_http: bool = False
    """Talk to the registry over plain HTTP (a registry inside the cluster without TLS)."""
    k8s_pod_ip: str = ""
    """This orchestrator pod's IP (the chart sets it from `status.podIP`): sandbox pods reach the
    model gateway of the replica running their turn there. Required in-cluster with `kubernetes`."""
    k8s_egress_selector: dict[str, str] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "cage", "app.kubernetes.io/component": "egress"}
    )
    """Pod labels of the egress proxy (the only way out of `bridge`/allowlist sandboxes)."""
    k8s_gateway_selector: dict[str, str] = Field(
        default_factory=lambda: {
            "app.kubernetes.io/name": "cage",
            "app.kubernetes.io/component": "orchestrator",
        }
    )
    """Pod labels of the orchestrator replicas (the headless `cage-gateway` Service's endpoints)."""

    @field_validator("extra_ca_certs", mode="before")
    @classmethod
    def _empty_means_none(cls, value: object) -> object:
        return None if value == "" else value

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> Settings:
        if self.replica_heartbeat_seconds >= self.replica_lease_seconds:
            raise ValueError(
                f"CAGE_REPLICA_HEARTBEAT_SECONDS ({self.replica_heartbeat_seconds:g}) must be below "
                f"CAGE_REPLICA_LEASE_SECONDS ({self.replica_lease_seconds:g})"
            )
        return self

    @model_validator(mode="after")
    def _data_dir_follows_app_dir(self) -> Settings:
        # Tied to the app, so `cage keys create` from a sub-directory and the server share one database.
        if "data_dir" not in self.model_fields_set:
            self.data_dir = self.app_dir / ".cage"
        return self

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'cage.db').resolve()}"
