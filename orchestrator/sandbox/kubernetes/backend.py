"""`KubernetesBackend`: the `SandboxBackend` on a Kubernetes namespace (`CAGE_BACKEND=kubernetes`).

A sandbox is a Pod (`manifests.pod_manifest`), a workspace volume a PersistentVolumeClaim, an
isolated sandbox's egress policy a NetworkPolicy of its own, and (`bridge`, allowlists) an entry in
the egress proxies' configuration (`egress.KubeEgress`), written when its pod runs and dropped when
it goes. Exec and file transfer go over the
pods/exec websocket (`exec.KubeExecHandle`); files are tar streams extracted by the sandbox user
inside the pod, never by the host. `kubernetes_asyncio` is imported here only, lazily (the Docker
deployment never loads it).

Differences from Docker, by nature of the engine:
- a pod starts when it is created: `start` waits until it runs; `stop` deletes it (SIGTERM, then
  SIGKILL after the grace period, done by the kubelet) and `start` of a stopped box re-creates it
  from the manifest this process made (its workspace lives on in its PVC);
- every exec runs as the pod's user (pods/exec has no user): an `ExecSpec.user` naming root or
  another uid is refused;
- the pod's id is its name (unique in the namespace), which every API call takes.
"""

from __future__ import annotations

import posixpath
import signal as signals
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import anyio
import structlog
import yaml

from orchestrator.errors import EngineUnavailable, SandboxError, SandboxNotFound
from orchestrator.sandbox.backend import (
    ClusterLock,
    CreateSpec,
    ExecSpec,
    FileEntry,
    ProcessInfo,
    SandboxInfo,
    SandboxRef,
    SandboxState,
    VolumeInfo,
    feed_stdin,
)
from orchestrator.sandbox.docker.archive import files_tar, read_single_file
from orchestrator.sandbox.docker.backend import PS_SCRIPT, _process
from orchestrator.sandbox.kubernetes.egress import (
    EGRESS_CONTAINER,
    WRITE_SCRIPT,
    KubeEgress,
    ProxyPod,
    SandboxPod,
    needs_proxy,
)
from orchestrator.sandbox.kubernetes.exec import PROTOCOLS, KubeExecHandle, signal_argv, wrap_argv
from orchestrator.sandbox.kubernetes.manifests import (
    EGRESS_ANNOTATION,
    MAIN_CONTAINER,
    NAME_ANNOTATION,
    POLICY_LABEL,
    KubeTarget,
    Manifest,
    isolated_pod,
    k8s_labels,
    network_policy_manifest,
    pod_manifest,
    pod_name,
    pvc_manifest,
    read_labels,
)
from orchestrator.sandbox.kubernetes.proxy_logs import ProxyLogFollower
from orchestrator.sandbox.labels import MANAGED
from orchestrator.sandbox.network import GATEWAY_PORT
from orchestrator.sandbox.putfiles import PUT_SCRIPT, one_owner, put_error
from orchestrator.settings import Settings

log = structlog.get_logger(__name__)

_PHASES = {
    "Pending": SandboxState.CREATED,
    "Running": SandboxState.RUNNING,
    "Succeeded": SandboxState.STOPPED,
    "Failed": SandboxState.STOPPED,
}
NEEDED = (
    ("create", "pods", ""),
    ("create", "pods", "exec"),
    ("list", "pods", ""),
    ("create", "networkpolicies", ""),
)
"""(verb, resource, subresource) the service account must have in the namespace for `ping`."""
POD_IP_MISSING = (
    "CAGE_K8S_POD_IP is not set: sandbox pods reach the model gateway of the replica running their"
    " turn at this pod's IP (set it from the downward API, `fieldRef: status.podIP`, as the chart does)"
)
_GROUPS = {"networkpolicies": "networking.k8s.io"}


def target_from(settings: Settings) -> KubeTarget:
    """The manifests' view of `settings` (an empty string, as a chart value renders, means unset)."""
    return KubeTarget(
        namespace=settings.k8s_namespace,
        registry=settings.k8s_registry,
        runtime_class=settings.k8s_runtime_class or None,
        storage_class=settings.k8s_storage_class or None,
        workspace_size=settings.k8s_workspace_size,
        run_as_user=settings.k8s_run_as_user,
        image_pull_secret=settings.k8s_image_pull_secret or None,
        egress_selector=settings.k8s_egress_selector,
        gateway_selector=settings.k8s_gateway_selector,
        gateway_port=settings.gateway_port or GATEWAY_PORT,
    )


def _time(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def _status(pod: Any) -> SandboxState:
    if pod.metadata.deletion_timestamp is not None:
        return SandboxState.REMOVING
    return _PHASES.get((pod.status and pod.status.phase) or "", SandboxState.DEAD)


def _ref(pod: Any) -> SandboxRef:
    meta = pod.metadata
    notes = meta.annotations or {}
    return SandboxRef(
        id=meta.name,
        name=notes.get(NAME_ANNOTATION, meta.name),
        labels={k: v for k, v in read_labels(meta.labels, notes).items() if k != POLICY_LABEL},
        status=_status(pod),
    )


class KubernetesBackend:
    """SandboxBackend on one Kubernetes namespace (kubeconfig, or the in-cluster service account)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.target = target_from(settings)
        self._api: Any = None
        self._ws: Any = None
        self._conf: Any = None
        self._lock = anyio.Lock()
        self._made: dict[str, Manifest] = {}
        """Pod name -> the manifest it was created from (`start` re-creates a stopped box)."""
        selector = ",".join(f"{k}={v}" for k, v in sorted(self.target.egress_selector.items()))
        self._proxy_selector = selector
        self.egress = KubeEgress(
            self.namespace,
            sandboxes=self._sandbox_pods,
            proxies=self._proxy_pods,
            write=self._write_proxy,
            selector=selector,
        )
        self._logs = ProxyLogFollower(
            self.egress.denials,
            open_client=lambda: _k8s().ApiClient(configuration=self._conf),
            namespace=self.namespace,
            selector=selector,
            container=EGRESS_CONTAINER,
        )

    def use_cluster_lock(self, lock: ClusterLock) -> None:
        """Replicas share the database: their writes of the proxies' configuration take turns."""
        self.egress.use_cluster_lock(lock)

    @classmethod
    def from_settings(cls, settings: Settings) -> KubernetesBackend:
        return cls(settings)

    @property
    def namespace(self) -> str:
        return self.target.namespace

    async def _clients(self) -> tuple[Any, Any]:
        async with self._lock:
            if self._api is None:
                from kubernetes_asyncio import config as config_module
                from kubernetes_asyncio.config.config_exception import ConfigException
                from kubernetes_asyncio.stream import WsApiClient

                client, config = _k8s(), _untyped(config_module)

                conf = client.Configuration()
                try:
                    if self._settings.k8s_kubeconfig is None and _in_cluster():
                        config.load_incluster_config(client_configuration=conf)
                    else:
                        await config.load_kube_config(
                            config_file=str(self._settings.k8s_kubeconfig)
                            if self._settings.k8s_kubeconfig
                            else None,
                            context=self._settings.k8s_context,
                            client_configuration=conf,
                        )
                except (ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
                    raise EngineUnavailable(
                        f"no Kubernetes credentials: {type(exc).__name__}: {exc}"
                    ) from None
                self._api = client.ApiClient(configuration=conf)
                self._ws = WsApiClient(configuration=conf)
                self._conf = conf
            return self._api, self._ws

    async def _core(self) -> Any:
        client = _k8s()
        api, _ = await self._clients()
        return client.CoreV1Api(api)

    @asynccontextmanager
    async def _errors(self, what: str, *, not_found: str | None = None) -> AsyncIterator[None]:
        """Translate API errors once: 404 -> SandboxNotFound, no answer -> EngineUnavailable."""
        import aiohttp
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            yield
        except ApiException as exc:
            if exc.status == 404:
                raise SandboxNotFound(f"{what} ({not_found})" if not_found else what) from None
            reason = exc.reason or ""
            raise SandboxError(what, f"Kubernetes API {exc.status} {reason}: {_message(exc.body)}") from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            host = self._api.configuration.host if self._api is not None else "?"
            raise EngineUnavailable(
                f"Kubernetes API server {host} unreachable: {type(exc).__name__}"
            ) from None

    async def ping(self) -> None:
        """The API server answers and RBAC lets this identity run sandboxes in the namespace, and
        (in-cluster) the pod knows its own IP, where its sandboxes reach its model gateway."""
        pod_ip = self._settings.k8s_pod_ip
        if _in_cluster() and not pod_ip:
            raise EngineUnavailable(POD_IP_MISSING)
        if pod_ip and not _is_ip(pod_ip):
            raise EngineUnavailable(f"CAGE_K8S_POD_IP is not an IP address: {pod_ip!r}")
        client = _k8s()
        api, _ = await self._clients()
        auth = client.AuthorizationV1Api(api)
        missing: list[str] = []
        async with self._errors("kubernetes"):
            for verb, resource, sub in NEEDED:
                review = {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SelfSubjectAccessReview",
                    "spec": {
                        "resourceAttributes": {
                            "namespace": self.namespace,
                            "verb": verb,
                            "resource": resource,
                            "subresource": sub,
                            "group": _GROUPS.get(resource, ""),
                        }
                    },
                }
                answer = await auth.create_self_subject_access_review(body=review)
                if not answer.status.allowed:
                    missing.append(f"{verb} {resource}{'/' + sub if sub else ''}")
        if missing:
            raise EngineUnavailable(
                f"RBAC in namespace {self.namespace} does not allow: {', '.join(missing)}"
            )

    async def find(self, labels: Mapping[str, str]) -> list[SandboxRef]:
        core = await self._core()
        selector = ",".join(f"{k}={v}" for k, v in sorted(k8s_labels(labels).items()))
        async with self._errors("pods"):
            pods = await core.list_namespaced_pod(self.namespace, label_selector=selector)
        refs = [_ref(pod) for pod in pods.items]
        return [ref for ref in refs if all(ref.labels.get(k) == v for k, v in labels.items())]

    async def inspect(self, sandbox_id: str) -> SandboxInfo:
        core = await self._core()
        async with self._errors(sandbox_id):
            pod = await core.read_namespaced_pod(sandbox_id, self.namespace)
        box = next(iter(pod.spec.containers), None)
        state = _main_state(pod)
        user = ""
        if (
            box is not None
            and box.security_context is not None
            and box.security_context.run_as_user is not None
        ):
            user = str(box.security_context.run_as_user)
        return SandboxInfo(
            ref=_ref(pod),
            image=box.image if box is not None else "",
            created_at=_time(pod.metadata.creation_timestamp),
            started_at=_time(
                getattr(state.running, "started_at", None) or getattr(state.terminated, "started_at", None)
            )
            if state
            else None,
            finished_at=_time(getattr(state.terminated, "finished_at", None)) if state else None,
            user=user,
        )

    async def create(self, spec: CreateSpec) -> SandboxRef:
        try:
            pod = pod_manifest(spec, self.target)
        except ValueError as exc:
            raise SandboxError(spec.name, str(exc)) from None
        name = pod["metadata"]["name"]
        if spec.egress is not None:
            pod = isolated_pod(pod, spec.egress)
            policy = network_policy_manifest(spec, spec.egress, self.target)
            client = _k8s()
            api, _ = await self._clients()
            net = client.NetworkingV1Api(api)
            async with self._errors(spec.name):
                try:
                    await net.create_namespaced_network_policy(self.namespace, body=policy)
                except Exception as exc:
                    if getattr(exc, "status", None) != 409:  # already there (a re-create): keep it
                        raise
        core = await self._core()
        try:
            async with self._errors(spec.name, not_found="namespace"):
                await core.create_namespaced_pod(self.namespace, body=pod)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._remove_policy(name)
            raise
        self._made[name] = pod
        return SandboxRef(id=name, name=spec.name, labels=dict(spec.labels))

    async def start(self, ref: SandboxRef) -> None:
        core = await self._core()
        try:
            async with self._errors(ref.name or ref.id):
                pod = await core.read_namespaced_pod(ref.id, self.namespace)
        except SandboxNotFound:
            made = self._made.get(ref.id)
            if made is None:
                raise
            async with self._errors(ref.name or ref.id):
                await core.create_namespaced_pod(self.namespace, body=made)
                pod = await core.read_namespaced_pod(ref.id, self.namespace)
        with anyio.fail_after(self._settings.acquire_timeout):
            while (pod.status and pod.status.phase) == "Pending":
                waiting = _waiting_reason(pod)
                if waiting in (
                    "ErrImagePull",
                    "ImagePullBackOff",
                    "InvalidImageName",
                    "CreateContainerConfigError",
                ):
                    raise SandboxError(ref.name or ref.id, f"pod cannot start: {waiting}")
                await anyio.sleep(0.5)
                async with self._errors(ref.name or ref.id):
                    pod = await core.read_namespaced_pod(ref.id, self.namespace)
        if (pod.status and pod.status.phase) != "Running":
            raise SandboxError(
                ref.name or ref.id, f"pod is {pod.status.phase if pod.status else 'unknown'}, not running"
            )
        meta = pod.metadata
        policy_key = (meta.annotations or {}).get(EGRESS_ANNOTATION)
        if POLICY_LABEL in (meta.labels or {}) and needs_proxy(policy_key):
            await self.egress.admit(meta.name)  # before its first exec: it has its IP now
            self._logs.start()  # its refused requests become events

    async def stop(self, ref: SandboxRef, *, timeout: float = 2.0) -> None:  # noqa: ASYNC109 - engine grace
        await self._delete_pod(ref, grace=max(0, int(timeout)), wait=True)
        await self._refresh_egress()

    async def remove(self, ref: SandboxRef, *, force: bool = False) -> None:
        await self._delete_pod(ref, grace=0 if force else None, wait=False)
        self._made.pop(ref.id, None)
        await self._remove_policy(ref.id)
        self.egress.forget(ref.name or ref.id)
        await self._refresh_egress()

    async def _refresh_egress(self) -> None:
        """Drop pods that went away from the proxies' configuration (their IPs will be reused);
        a failure is left to the next refresh (the leader's network sweep)."""
        try:
            await self.egress.refresh()
        except SandboxError as exc:
            log.warning("egress.k8s.refresh_failed", error=str(exc))

    async def _sandbox_pods(self) -> list[SandboxPod]:
        core = await self._core()
        async with self._errors("pods"):
            pods = await core.list_namespaced_pod(self.namespace, label_selector=POLICY_LABEL)
        return [_sandbox_pod(pod) for pod in pods.items]

    async def _proxy_pods(self) -> list[ProxyPod]:
        core = await self._core()
        async with self._errors("egress proxy pods"):
            pods = await core.list_namespaced_pod(self.namespace, label_selector=self._proxy_selector)
        return [
            ProxyPod(
                name=pod.metadata.name,
                running=_container_running(pod, EGRESS_CONTAINER),
                ready=_container_ready(pod, EGRESS_CONTAINER),
            )
            for pod in pods.items
        ]

    async def _write_proxy(self, proxy: str, conf: bytes) -> tuple[int, str]:
        """Run `WRITE_SCRIPT` in proxy pod `proxy` with `conf` on its stdin."""
        argv = ["sh", "-c", WRITE_SCRIPT]
        ws = await self._open_exec(SandboxRef(id=proxy, name=proxy), argv, container=EGRESS_CONTAINER)
        handle = KubeExecHandle(
            sandbox_id=proxy,
            ws=ws,
            send_signal=_no_signal,
            max_line_bytes=self._settings.max_line_bytes,
            stderr_keep_bytes=4096,
            grace=1.0,
        )
        async with handle:
            await handle.write_stdin(conf)
            await handle.close_stdin()
            with anyio.fail_after(60):
                code = await handle.wait()
        return code, handle.stderr.decode(errors="replace")

    async def _delete_pod(self, ref: SandboxRef, *, grace: int | None, wait: bool) -> None:
        core = await self._core()
        try:
            async with self._errors(ref.name or ref.id):
                await core.delete_namespaced_pod(ref.id, self.namespace, grace_period_seconds=grace)
        except SandboxNotFound:
            return
        if not wait:
            return
        with anyio.move_on_after((grace or 0) + 30.0):
            while True:
                try:
                    async with self._errors(ref.name or ref.id):
                        await core.read_namespaced_pod(ref.id, self.namespace)
                except SandboxNotFound:
                    return
                await anyio.sleep(0.25)

    async def _remove_policy(self, name: str) -> None:
        client = _k8s()
        api, _ = await self._clients()
        try:
            async with self._errors(name):
                await client.NetworkingV1Api(api).delete_namespaced_network_policy(name, self.namespace)
        except SandboxNotFound:
            return

    async def exec(self, ref: SandboxRef, spec: ExecSpec) -> KubeExecHandle:
        if spec.user in ("root", "0") or spec.user.startswith("0:"):
            raise SandboxError(ref.name or ref.id, "pods run as non-root: an exec cannot be root")
        if spec.files:  # an exec of their own first: a pod's exec costs what the stream costs
            await self.put_files(ref, spec.files_dir, spec.files)
            spec = spec.model_copy(update={"files": (), "files_dir": ""})
        ws = await self._open_exec(ref, wrap_argv(spec.argv, env=spec.env, workdir=spec.workdir))
        self._logs.start()  # a turn of this process may run in a box another replica admitted
        handle = KubeExecHandle(
            sandbox_id=ref.name or ref.id,
            ws=ws,
            send_signal=lambda pgid, sig: self._signal(ref, pgid, sig),
            max_line_bytes=self._settings.max_line_bytes,
            stderr_keep_bytes=self._settings.stderr_keep_bytes,
            grace=spec.grace_seconds,
        )
        try:
            await handle.read_pgid()
            await feed_stdin(handle, spec.stdin)
        except BaseException:
            await handle.aclose()
            raise
        return handle

    async def _open_exec(self, ref: SandboxRef, argv: list[str], *, container: str = MAIN_CONTAINER) -> Any:
        client = _k8s()
        _, ws_api = await self._clients()
        async with self._errors(ref.name or ref.id):
            ctx = client.CoreV1Api(ws_api).connect_get_namespaced_pod_exec(
                ref.id,
                self.namespace,
                command=argv,
                container=container,
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
                _headers={"sec-websocket-protocol": ", ".join(PROTOCOLS)},
            )
            return await (await ctx)

    async def _signal(self, ref: SandboxRef, pgid: int, sig: signals.Signals) -> None:
        try:
            ws = await self._open_exec(ref, signal_argv(pgid, sig))
        except SandboxError:  # the pod or the process is gone: nothing left to signal
            return
        try:
            with anyio.move_on_after(5.0):
                async for _ in ws:
                    pass
        finally:
            with anyio.CancelScope(shield=True):
                await ws.close()

    async def put_files(self, ref: SandboxRef, dest_dir: str, files: Sequence[FileEntry]) -> None:
        """Extract a tar with GNU tar run inside the pod as its (non-root) user; see `PUT_SCRIPT`."""
        if not files:
            return
        one_owner(ref.name or ref.id, files)
        data = files_tar(files)
        dest_dir = posixpath.normpath(dest_dir)
        spec = ExecSpec(argv=("sh", "-c", PUT_SCRIPT, "cage-put", dest_dir), stdin=data)
        async with await self.exec(ref, spec) as handle:
            code = await handle.wait()
        if code != 0:
            raise put_error(ref.name or ref.id, dest_dir, code, handle.stderr)

    async def get_file(self, ref: SandboxRef, path: str) -> bytes:
        """`tar -c` of the one file, read inside the pod by its user (`-h` is not given: a symlink
        comes back as a link entry, not as what it points to)."""
        import base64

        parent, name = posixpath.split(posixpath.normpath(path))
        argv = (
            "sh",
            "-c",
            '[ -e "$1/$2" ] || [ -L "$1/$2" ] || exit 2; tar -c -f - -C "$1" -- "$2" | base64 -w 0; echo',
            "cage-get",
            parent or "/",
            name,
        )
        async with await self.exec(ref, ExecSpec(argv=argv)) as handle:
            lines = [item for item in [line async for line in handle] if isinstance(item, bytes)]
            code = await handle.wait()
        if code != 0 or not lines or not lines[0]:
            raise SandboxNotFound(f"{ref.name or ref.id} (file {path})")
        try:
            return read_single_file([base64.b64decode(lines[0])], limit=self._settings.max_line_bytes)
        except (ValueError, IsADirectoryError) as exc:
            raise SandboxError(ref.name or ref.id, f"cannot read {path}: {exc}") from exc

    async def ensure_volume(
        self, name: str, labels: Mapping[str, str], *, tmpfs_bytes: int | None = None
    ) -> bool:
        if tmpfs_bytes is not None:
            raise SandboxError(name, "memory-backed workspaces (CAGE_WORKSPACE_TMPFS_BYTES) are Docker-only")
        core = await self._core()
        try:
            async with self._errors(name):
                await core.read_namespaced_persistent_volume_claim(pod_name(name), self.namespace)
            return False
        except SandboxNotFound:
            pass
        async with self._errors(name):
            await core.create_namespaced_persistent_volume_claim(
                self.namespace, body=pvc_manifest(name, labels, self.target)
            )
        return True

    async def remove_volume(self, name: str) -> None:
        core = await self._core()
        try:
            async with self._errors(name):
                await core.delete_namespaced_persistent_volume_claim(pod_name(name), self.namespace)
        except SandboxNotFound:
            return

    async def list_volumes(self, labels: Mapping[str, str], *, unused: bool = False) -> list[VolumeInfo]:
        core = await self._core()
        selector = ",".join(f"{k}={v}" for k, v in sorted(k8s_labels(labels).items()))
        async with self._errors("persistentvolumeclaims"):
            claims = await core.list_namespaced_persistent_volume_claim(
                self.namespace, label_selector=selector
            )
            used: set[str] = set()
            if unused:
                pods = await core.list_namespaced_pod(self.namespace, label_selector=f"{MANAGED}=true")
                for pod in pods.items:
                    for volume in pod.spec.volumes or []:
                        if volume.persistent_volume_claim is not None:
                            used.add(volume.persistent_volume_claim.claim_name)
        out: list[VolumeInfo] = []
        for claim in claims.items:
            meta = claim.metadata
            notes = meta.annotations or {}
            found = read_labels(meta.labels, notes)
            if meta.name in used or not all(found.get(k) == v for k, v in labels.items()):
                continue
            out.append(
                VolumeInfo(
                    name=notes.get(NAME_ANNOTATION, meta.name),
                    labels=found,
                    created_at=_time(meta.creation_timestamp),
                )
            )
        return out

    async def sweep_networks(self) -> list[str]:
        """Remove NetworkPolicies whose sandbox pod is gone."""
        client = _k8s()
        api, _ = await self._clients()
        core = client.CoreV1Api(api)
        net = client.NetworkingV1Api(api)
        async with self._errors("networkpolicies"):
            policies = await net.list_namespaced_network_policy(self.namespace, label_selector=POLICY_LABEL)
            pods = await core.list_namespaced_pod(self.namespace, label_selector=POLICY_LABEL)
        alive = {pod.metadata.name for pod in pods.items}
        removed: list[str] = []
        for policy in policies.items:
            name = policy.metadata.name
            if name not in alive and name not in self._made:
                await self._remove_policy(name)
                removed.append(name)
        await self._refresh_egress()  # pods gone behind Cage's back, proxies that restarted
        return removed

    async def copy_volume(self, source: str, target: str, *, image: str, owner: tuple[int, int]) -> None:
        """`cp -a` in a throw-away pod (no network, no capabilities) running as `owner`."""
        import secrets

        from orchestrator.sandbox.backend import VolumeMount

        name = f"cage-copy-{secrets.token_hex(6)}"
        spec = CreateSpec(
            image=image,
            name=name,
            command=("sh", "-c", "cp -a /cage-from/. /cage-to/"),
            labels={MANAGED: "true", "cage.helper": "volume-copy"},
            user=f"{owner[0]}:{owner[1]}",
            mounts=(
                VolumeMount(source=source, target="/cage-from", read_only=True),
                VolumeMount(source=target, target="/cage-to", owner=owner),
            ),
            cap_drop=("ALL",),
        )
        ref = await self.create(spec)
        core = await self._core()
        try:
            with anyio.fail_after(600):
                while True:
                    async with self._errors(name):
                        pod = await core.read_namespaced_pod(ref.id, self.namespace)
                    phase = pod.status.phase if pod.status else ""
                    if phase == "Succeeded":
                        return
                    if phase == "Failed":
                        raise SandboxError(name, f"copying volume {source} into {target} failed")
                    await anyio.sleep(0.5)
        finally:
            with anyio.CancelScope(shield=True):
                await self.remove(ref, force=True)

    async def disk_limit_supported(self) -> bool:
        """`ephemeral-storage` limits are enforced by the kubelet (eviction) on every cluster."""
        return True

    async def list_processes(self, ref: SandboxRef) -> list[ProcessInfo]:
        async with await self.exec(ref, ExecSpec(argv=("sh", "-c", PS_SCRIPT))) as handle:
            lines = [item for item in [line async for line in handle] if isinstance(item, bytes)]
            await handle.wait()
        found = [proc for proc in (_process(line) for line in lines) if proc is not None]
        lister = {proc.pid for proc in found if handle.pgid is not None and proc.pgid == handle.pgid}
        lister |= {proc.ppid for proc in found if proc.pid == handle.pgid and proc.ppid > 1}
        return [proc for proc in found if proc.pid not in lister]

    async def kill_processes(self, ref: SandboxRef, pids: Sequence[int], *, user: str) -> None:
        if not pids:
            return
        argv = ("sh", "-c", 'kill -s KILL "$@" 2>/dev/null; exit 0', "cage-kill", *map(str, pids))
        async with await self.exec(ref, ExecSpec(argv=argv)) as handle:
            await handle.wait()

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._logs.stop)
        for api in (self._api, self._ws):
            if api is not None:
                await api.close()
        self._api = self._ws = None


def _k8s() -> Any:
    """`kubernetes_asyncio.client`, imported on first use; its generated signatures are too narrow
    for plain-dict bodies and list-valued exec commands (which the client accepts), hence Any."""
    from kubernetes_asyncio import client

    return _untyped(client)


def _untyped(module: object) -> Any:
    return module


def _is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _in_cluster() -> bool:
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG")


def _message(body: object) -> str:
    import json

    try:
        data = json.loads(body) if isinstance(body, (str, bytes)) else {}
    except ValueError:
        return ""
    return str(data.get("message", ""))[:300] if isinstance(data, dict) else ""


def _main_state(pod: Any, container: str = MAIN_CONTAINER) -> Any:
    for status in (pod.status and pod.status.container_statuses) or []:
        if status.name == container:
            return status.state
    return None


def _container_running(pod: Any, container: str) -> bool:
    if pod.metadata.deletion_timestamp is not None:
        return False
    return getattr(_main_state(pod, container), "running", None) is not None


def _container_ready(pod: Any, container: str) -> bool:
    if pod.metadata.deletion_timestamp is not None:
        return False
    statuses = (pod.status and pod.status.container_statuses) or []
    return any(status.name == container and bool(status.ready) for status in statuses)


def _sandbox_pod(pod: Any) -> SandboxPod:
    status = pod.status
    ips: tuple[str, ...] = ()
    if status is not None:
        ips = tuple(item.ip for item in status.pod_ips or () if item.ip) or (
            (status.pod_ip,) if status.pod_ip else ()
        )
    phase = (status.phase if status is not None else "") or ""
    notes = pod.metadata.annotations or {}
    return SandboxPod(
        name=pod.metadata.name,
        ips=ips,
        policy_key=notes.get(EGRESS_ANNOTATION),
        gone=pod.metadata.deletion_timestamp is not None or phase in ("Succeeded", "Failed"),
        sandbox=notes.get(NAME_ANNOTATION, ""),
    )


async def _no_signal(pgid: int, sig: signals.Signals) -> None:
    """A proxy's configuration write has no process group to signal: closing its stream ends it."""


def _waiting_reason(pod: Any) -> str:
    state = _main_state(pod)
    waiting = getattr(state, "waiting", None)
    return str(getattr(waiting, "reason", "") or "")


def startup_check(settings: Settings) -> str | None:
    """Run `ping` once (credentials, API server, RBAC) before serving; the reason when it fails.

    `cage serve` logs it and starts anyway: `/readyz` keeps answering 503 with the same reason
    until the cluster side is fixed, which is what a Deployment's readiness probe acts on.
    """

    async def check() -> str | None:
        backend = KubernetesBackend(settings)
        try:
            await backend.ping()
        except SandboxError as exc:
            return str(exc)
        finally:
            await backend.aclose()
        return None

    return anyio.run(check)
