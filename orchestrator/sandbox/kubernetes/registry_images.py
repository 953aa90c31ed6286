"""`RegistryImageResolver`: the `ImageBuilder` of `CAGE_BACKEND=kubernetes`, with no Docker engine.

Runner images are built and pushed on a machine with Docker (`cage images push --manifest FILE`).
The orchestrator pods compute each tag exactly as the Docker builder does (`plan_build`: the
context files, the build args and the base image id), taking the base image id from that
manifest, and look the tag up in the registry with the OCI distribution API
(`HEAD /v2/<name>/manifests/<tag>`). A missing image is an error naming it and the command that
pushes it; nothing is ever built here.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path

import httpx
import structlog
from anyio import to_thread
from pydantic import ValidationError

from orchestrator.errors import ImageBuildError, UsageError
from orchestrator.sandbox.images import (
    BaseImage,
    BuildProgress,
    ImageInfo,
    ImageRef,
    ImagesManifest,
    ProgressCallback,
    RunnerImage,
    default_images_dir,
    extra_context_files,
    plan_build,
    runner_image,
)
from orchestrator.sandbox.kubernetes.manifests import image_ref
from orchestrator.settings import Settings

log = structlog.get_logger(__name__)

MANIFEST_ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
"""Manifest media types a registry may answer for a tag (`Accept` of the lookup)."""

_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')
_TIMEOUT = httpx.Timeout(30.0)


def load_manifest(path: Path) -> ImagesManifest:
    """Read the file `cage images push --manifest` wrote.

    Raises:
        UsageError: missing or unreadable file, or not an images manifest (the message names the file).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"images manifest {path}: {exc.strerror or exc}") from None
    try:
        return ImagesManifest.model_validate_json(text)
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()
        )
        raise UsageError(f"images manifest {path}: {where}") from None


def registry_credentials(auth_file: Path, host: str) -> tuple[str, str] | None:
    """(user, password) for `host` from a Docker config JSON (`auths`), or None when it has none.

    Raises:
        UsageError: the file is missing or not a Docker config JSON (names the file, never a secret).
    """
    try:
        doc = json.loads(auth_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"registry auth file {auth_file}: {exc.strerror or exc}") from None
    except ValueError:
        raise UsageError(f"registry auth file {auth_file}: not JSON") from None
    auths = doc.get("auths") if isinstance(doc, dict) else None
    if not isinstance(auths, dict):
        raise UsageError(f"registry auth file {auth_file}: no `auths` object (expected a Docker config JSON)")
    entry = next(
        (v for k, v in auths.items() if _host_of(k) == host and isinstance(v, dict)),
        None,
    )
    if entry is None:
        return None
    if isinstance(entry.get("username"), str) and isinstance(entry.get("password"), str):
        return entry["username"], entry["password"]
    auth = entry.get("auth")
    if isinstance(auth, str):
        try:
            user, sep, password = base64.b64decode(auth, validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            sep = ""
        if sep:
            return user, password
    raise UsageError(f"registry auth file {auth_file}: auths.{host} has neither `auth` nor username/password")


def _host_of(key: str) -> str:
    """`https://host:5000/v1/` or `host:5000` -> `host:5000`."""
    return key.removeprefix("https://").removeprefix("http://").split("/", 1)[0]


def split_reference(ref: str) -> tuple[str, str, str]:
    """`host:5000/path/name:tag` -> (host, repository name, tag)."""
    host, _, rest = ref.partition("/")
    name, sep, tag = rest.rpartition(":")
    if not sep or "/" in tag or not name or not host:
        raise UsageError(f"image reference {ref!r} is not `<registry host>/<name>:<tag>`")
    return host, name, tag


class RegistryClient:
    """Looks manifests up in one registry (basic auth, or a bearer token got with it on a challenge)."""

    def __init__(self, host: str, *, credentials: tuple[str, str] | None, plain_http: bool) -> None:
        self._host = host
        api_host = "registry-1.docker.io" if host == "docker.io" else host  # Docker Hub's API host
        self._base = f"{'http' if plain_http else 'https'}://{api_host}"
        self._credentials = credentials
        self._tokens: dict[str, str] = {}

    async def manifest_exists(self, name: str, tag: str) -> bool:
        """Whether `name:tag` is in the registry (HEAD of its manifest).

        Raises:
            ImageBuildError: the registry cannot be reached or refuses the lookup (names the image).
        """
        ref = f"{self._host}/{name}:{tag}"
        url = f"{self._base}/v2/{name}/manifests/{tag}"
        try:
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                response = await client.head(url, headers=self._headers(name))
                if response.status_code == 401 and self._credentials is not None:
                    token = await self._token(client, name, response.headers.get("www-authenticate", ""))
                    if token is not None:
                        self._tokens[name] = token
                        response = await client.head(url, headers=self._headers(name))
        except httpx.HTTPError as exc:
            raise ImageBuildError(
                ref, f"registry {self._host} unreachable: {type(exc).__name__}: {exc}"
            ) from None
        if response.status_code == 200:
            return True
        if response.status_code == 404:
            return False
        if response.status_code in (401, 403):
            hint = "set CAGE_K8S_REGISTRY_AUTH_FILE" if self._credentials is None else "check its credentials"
            raise ImageBuildError(
                ref, f"registry {self._host} refused the lookup (HTTP {response.status_code}): {hint}"
            )
        raise ImageBuildError(
            ref, f"registry {self._host} answered HTTP {response.status_code} for the lookup"
        )

    def _headers(self, name: str) -> dict[str, str]:
        headers = {"Accept": MANIFEST_ACCEPT}
        token = self._tokens.get(name)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        elif self._credentials is not None:
            raw = f"{self._credentials[0]}:{self._credentials[1]}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode("ascii")
        return headers

    async def _token(self, client: httpx.AsyncClient, name: str, challenge: str) -> str | None:
        """A bearer token for pulling `name` from the challenge's realm, or None without a Bearer one."""
        scheme, _, params = challenge.partition(" ")
        if scheme.lower() != "bearer" or self._credentials is None:
            return None
        fields = dict(_CHALLENGE_PARAM.findall(params))
        realm = fields.get("realm")
        if not realm:
            return None
        query = {"scope": fields.get("scope") or f"repository:{name}:pull"}
        if fields.get("service"):
            query["service"] = fields["service"]
        response = await client.get(realm, params=query, auth=self._credentials)
        if response.status_code != 200:
            return None
        body = response.json()
        token = body.get("token") or body.get("access_token") if isinstance(body, dict) else None
        return token if isinstance(token, str) and token else None


class RegistryImageResolver:
    """Finds runner images in `CAGE_K8S_REGISTRY`; implements `orchestrator.sandbox.images.ImageBuilder`."""

    def __init__(
        self,
        settings: Settings,
        *,
        manifest: ImagesManifest | None = None,
        images_dir: Path | None = None,
        source_root: Path | None = None,
    ) -> None:
        if not settings.k8s_registry:
            raise UsageError(
                "CAGE_BACKEND=kubernetes needs CAGE_K8S_REGISTRY (where `cage images push` pushed)"
            )
        if manifest is None:
            if settings.k8s_images_manifest is None:
                raise UsageError(
                    "CAGE_BACKEND=kubernetes needs CAGE_K8S_IMAGES_MANIFEST: the file "
                    f"`cage images push --registry {settings.k8s_registry} --manifest FILE` writes"
                )
            manifest = load_manifest(settings.k8s_images_manifest)
        self._settings = settings
        self._manifest = manifest
        self._images_dir = images_dir or default_images_dir()
        self._source_root = source_root
        host = split_reference(image_ref("cage/x:y", settings.k8s_registry))[0]
        auth_file = settings.k8s_registry_auth_file
        credentials = registry_credentials(auth_file, host) if auth_file is not None else None
        self._client = RegistryClient(
            host, credentials=credentials, plain_http=settings.k8s_registry_plain_http
        )
        self._found: set[str] = set()

    async def aclose(self) -> None:
        """Nothing stays open: each registry lookup has its own HTTP client."""

    def plan_tag(self, image: RunnerImage, base: str) -> ImageRef:
        """The tag the Docker builder gives `image` on `base`, computed from the manifest's base id
        (or `base` itself when the manifest records it as `image`'s ready image).

        Blocking (reads the context files).

        Raises:
            ImageBuildError: `base` is not in the manifest (names the push command).
        """
        base_id = self._manifest.base_images.get(base)
        if base_id is None:
            raise ImageBuildError(
                f"cage/{image.name}",
                f"base image {base} is not in the images manifest {self._settings.k8s_images_manifest}: "
                f"run `cage images push --registry {self._settings.k8s_registry} --manifest FILE "
                f"--base {self._settings.base_image} --base {base}` on a machine with Docker and deploy "
                "that file",
            )
        if self._manifest.ready_images.get(base) == image.runner:  # a ready image: runs as is
            return ImageRef(tag=base, image_hash=base_id.removeprefix("sha256:"))
        extra = extra_context_files(
            image,
            extra_ca_certs=self._settings.extra_ca_certs,
            source_root=self._source_root,
            images_dir=self._images_dir,
        )
        plan = plan_build(
            image, BaseImage(ref=base, id=base_id), images_dir=self._images_dir, extra_files=extra
        )
        return ImageRef(tag=plan.tag, image_hash=plan.image_hash)

    async def ensure(
        self, runner: str, *, base: str | None = None, on_progress: ProgressCallback | None = None
    ) -> ImageRef:
        """The image for `runner` on `base` (None: `CAGE_BASE_IMAGE`), if the registry has it.

        Raises:
            ImageBuildError: not pushed (names the pulled reference and `cage images push`), the
                base is not in the manifest, or the registry cannot be asked.
        """
        image = runner_image(runner)
        ref = await to_thread.run_sync(self.plan_tag, image, base or self._settings.base_image)
        pulled = image_ref(ref.tag, self._settings.k8s_registry)
        if pulled == ref.tag:  # a ready image named with its own registry: the pods pull it there
            self._found.add(ref.tag)
        if ref.tag not in self._found:
            _, name, tag = split_reference(pulled)
            if not await self._client.manifest_exists(name, tag):
                raise ImageBuildError(
                    pulled,
                    "not in the registry: run `cage images push --registry "
                    f"{self._settings.k8s_registry} --manifest FILE {image.name}` on a machine with Docker "
                    "(the image's context or the base changed since the last push)",
                )
            self._found.add(ref.tag)
            log.info("image.registry.found", tag=ref.tag, ref=pulled)
        if on_progress is not None:
            await on_progress(BuildProgress(tag=ref.tag, phase="cached", message="in the registry"))
        return ref

    async def build(
        self, runner: str, *, force: bool = False, on_progress: ProgressCallback | None = None
    ) -> ImageRef:
        """Look `runner`'s image up on the default base; images are never built here.

        Raises:
            UsageError: `force` (a rebuild needs Docker: `cage images push` on a build machine).
            ImageBuildError: as `ensure`.
        """
        if force:
            raise UsageError(
                "the Kubernetes backend builds no images: rebuild with `cage images build --force` and "
                "`cage images push --manifest FILE` on a machine with Docker"
            )
        return await self.ensure(runner, on_progress=on_progress)

    async def list_images(self) -> list[ImageInfo]:
        """No engine holds images here: the registry's are listed by its own tools."""
        return []

    async def prune(self, keep_in_use: set[str]) -> list[str]:
        """Nothing to prune: registry retention belongs to the registry (returns no tag)."""
        return []


__all__ = [
    "MANIFEST_ACCEPT",
    "RegistryClient",
    "RegistryImageResolver",
    "load_manifest",
    "registry_credentials",
    "split_reference",
]
