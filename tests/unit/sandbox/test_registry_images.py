"""The Kubernetes backend's image resolver: tags computed without Docker, looked up in a real
(tiny, in-process) registry HTTP server speaking the OCI distribution manifest endpoint."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from orchestrator.errors import ImageBuildError, UsageError
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.images import (
    RUNNER_IMAGES,
    BaseImage,
    BuildProgress,
    ImageRef,
    ImagesManifest,
    RunnerImage,
)
from orchestrator.sandbox.kubernetes.registry_images import (
    RegistryImageResolver,
    load_manifest,
    registry_credentials,
    split_reference,
)
from orchestrator.settings import Settings

BASE_REF = "cage/base:bookworm"
BASE_ID = "sha256:" + "7" * 64
SECRET = "s3cret-pass"


@dataclass
class Registry:
    """What the fake registry holds and saw."""

    present: set[str] = field(default_factory=set)
    """`<name>:<tag>` whose manifest exists."""
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    """(method, path, headers) of every request."""
    basic: str | None = None
    """Required `Authorization: Basic ...` value (None: anonymous)."""
    bearer: bool = False
    """Answer 401 with a Bearer challenge; the token endpoint takes the basic credentials."""
    host: str = ""


def _handler(registry: Registry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def _record(self) -> None:
            registry.requests.append(
                (self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
            )

        def do_GET(self) -> None:
            self._record()
            url = urlparse(self.path)
            if url.path != "/token" or self.headers.get("Authorization") != registry.basic:
                self.send_response(401)
                self.end_headers()
                return
            scope = parse_qs(url.query).get("scope", [""])[0]
            body = json.dumps({"token": f"tok-{scope}"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_HEAD(self) -> None:
            self._record()
            prefix, _, rest = self.path.partition("/v2/")
            name, sep, tag = rest.rpartition("/manifests/")
            auth = self.headers.get("Authorization")
            if registry.bearer:
                ok = auth == f"Bearer tok-repository:{name}:pull"
            else:
                ok = registry.basic is None or auth == registry.basic
            if not ok:
                self.send_response(401)
                if registry.bearer:
                    realm = f"http://{registry.host}/token"
                    challenge = f'Bearer realm="{realm}",service="fake",scope="repository:{name}:pull"'
                    self.send_header("WWW-Authenticate", challenge)
                self.end_headers()
                return
            found = not prefix and sep and f"{name}:{tag}" in registry.present
            self.send_response(200 if found else 404)
            if found:
                self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
                self.send_header("Docker-Content-Digest", "sha256:" + "a" * 64)
            self.end_headers()

    return Handler


@pytest.fixture
def registry() -> Iterator[Registry]:
    state = Registry()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.host = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
    thread.join()


def _settings(registry: Registry, tmp_path: Path, **extra: object) -> Settings:
    manifest = tmp_path / "images.json"
    manifest.write_text(
        ImagesManifest(registry=f"{registry.host}/cage", base_images={BASE_REF: BASE_ID}).model_dump_json()
    )
    return Settings(
        backend="kubernetes",
        k8s_registry=f"{registry.host}/cage",
        k8s_images_manifest=manifest,
        k8s_registry_plain_http=True,
        base_image=BASE_REF,
        data_dir=tmp_path / "data",
        **extra,  # type: ignore[arg-type]
    )


def _repo(tag: str) -> str:
    """`cage/claude:abc` -> the `<name>:<tag>` the registry holds under the `cage` prefix."""
    return f"cage/{tag}"


@pytest.mark.parametrize("image", list(RUNNER_IMAGES.values()), ids=lambda i: i.name)
def test_the_tag_without_docker_is_the_docker_builders_tag(image: RunnerImage, tmp_path: Path) -> None:
    settings = Settings(
        backend="kubernetes",
        k8s_registry="registry.example:5000/cage",
        base_image=BASE_REF,
        data_dir=tmp_path,
    )
    manifest = ImagesManifest(registry=settings.k8s_registry, base_images={BASE_REF: BASE_ID})
    resolved = RegistryImageResolver(settings, manifest=manifest).plan_tag(image, BASE_REF)
    plan, _ = DockerImageBuilder(settings)._plan(image, BaseImage(ref=BASE_REF, id=BASE_ID))
    assert (resolved.tag, resolved.image_hash) == (plan.tag, plan.image_hash)
    other = ImagesManifest(registry=settings.k8s_registry, base_images={BASE_REF: "sha256:" + "8" * 64})
    assert RegistryImageResolver(settings, manifest=other).plan_tag(image, BASE_REF).tag != plan.tag


async def test_a_pushed_image_resolves_and_is_asked_once(registry: Registry, tmp_path: Path) -> None:
    resolver = RegistryImageResolver(_settings(registry, tmp_path))
    expected = resolver.plan_tag(RUNNER_IMAGES["claude"], BASE_REF)
    registry.present.add(_repo(expected.tag))
    seen: list[BuildProgress] = []

    async def progress(p: BuildProgress) -> None:
        seen.append(p)

    ref = await resolver.ensure("claude", on_progress=progress)
    assert ref == expected
    assert [p.phase for p in seen] == ["cached"]
    name, tag = _repo(expected.tag).split(":")
    method, path, headers = registry.requests[0]
    assert (method, path) == ("HEAD", f"/v2/{name}/manifests/{tag}")
    assert "application/vnd.oci.image.manifest.v1+json" in headers["accept"]
    assert "authorization" not in headers
    assert await resolver.ensure("claude") == expected
    assert len(registry.requests) == 1  # found once, remembered


async def test_a_missing_image_names_the_reference_and_the_push_command(
    registry: Registry, tmp_path: Path
) -> None:
    resolver = RegistryImageResolver(_settings(registry, tmp_path))
    expected = resolver.plan_tag(RUNNER_IMAGES["codex"], BASE_REF)
    with pytest.raises(ImageBuildError) as caught:
        await resolver.ensure("codex")
    message = str(caught.value)
    assert f"{registry.host}/cage/{expected.tag}" in message
    assert f"cage images push --registry {registry.host}/cage --manifest FILE codex" in message


async def test_a_base_missing_from_the_manifest_is_a_clear_error(registry: Registry, tmp_path: Path) -> None:
    resolver = RegistryImageResolver(_settings(registry, tmp_path))
    with pytest.raises(
        ImageBuildError, match=r"base image debian:bookworm-slim is not in the images manifest"
    ):
        await resolver.ensure("claude", base="debian:bookworm-slim")
    assert registry.requests == []


def _auth_file(tmp_path: Path, host: str) -> Path:
    path = tmp_path / "config.json"
    auth = base64.b64encode(f"robot:{SECRET}".encode()).decode()
    path.write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return path


async def test_basic_credentials_from_a_docker_config_are_sent(registry: Registry, tmp_path: Path) -> None:
    registry.basic = "Basic " + base64.b64encode(f"robot:{SECRET}".encode()).decode()
    anonymous = RegistryImageResolver(_settings(registry, tmp_path))
    with pytest.raises(
        ImageBuildError, match=r"refused the lookup \(HTTP 401\): set CAGE_K8S_REGISTRY_AUTH_FILE"
    ):
        await anonymous.ensure("claude")
    settings = _settings(registry, tmp_path, k8s_registry_auth_file=_auth_file(tmp_path, registry.host))
    resolver = RegistryImageResolver(settings)
    expected = resolver.plan_tag(RUNNER_IMAGES["claude"], BASE_REF)
    registry.present.add(_repo(expected.tag))
    assert await resolver.ensure("claude") == expected
    assert registry.requests[-1][2]["authorization"] == registry.basic


async def test_a_bearer_challenge_gets_a_token_with_the_credentials(
    registry: Registry, tmp_path: Path
) -> None:
    registry.basic = "Basic " + base64.b64encode(f"robot:{SECRET}".encode()).decode()
    registry.bearer = True
    settings = _settings(registry, tmp_path, k8s_registry_auth_file=_auth_file(tmp_path, registry.host))
    resolver = RegistryImageResolver(settings)
    expected = resolver.plan_tag(RUNNER_IMAGES["tai"], BASE_REF)
    registry.present.add(_repo(expected.tag))
    assert await resolver.ensure("tai") == expected
    methods = [(m, urlparse(p).path) for m, p, _ in registry.requests]
    name = _repo(expected.tag).split(":")[0]
    assert methods[1] == ("GET", "/token")
    assert registry.requests[-1][2]["authorization"] == f"Bearer tok-repository:{name}:pull"


async def test_an_unreachable_registry_is_an_image_error_naming_it(tmp_path: Path) -> None:
    unused = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    host = f"127.0.0.1:{unused.server_address[1]}"
    unused.server_close()  # nothing listens there any more
    state = Registry(host=host)
    resolver = RegistryImageResolver(_settings(state, tmp_path))
    with pytest.raises(ImageBuildError, match=rf"registry {host} unreachable"):
        await resolver.ensure("claude")


async def test_force_build_list_and_prune_say_what_the_backend_does(
    registry: Registry, tmp_path: Path
) -> None:
    resolver = RegistryImageResolver(_settings(registry, tmp_path))
    with pytest.raises(UsageError, match="builds no images"):
        await resolver.build("claude", force=True)
    assert await resolver.list_images() == []
    assert await resolver.prune(set()) == []


def test_the_resolver_needs_a_registry_and_a_manifest(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="needs CAGE_K8S_REGISTRY"):
        RegistryImageResolver(Settings(backend="kubernetes", data_dir=tmp_path))
    with pytest.raises(
        UsageError, match=r"needs CAGE_K8S_IMAGES_MANIFEST.*--registry r\.example/cage --manifest"
    ):
        RegistryImageResolver(
            Settings(backend="kubernetes", k8s_registry="r.example/cage", data_dir=tmp_path)
        )


def test_a_bad_manifest_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "images.json"
    with pytest.raises(UsageError, match=rf"images manifest {path}: "):
        load_manifest(path)
    path.write_text(json.dumps({"kind": "cage.images/v1", "registry": "r/cage", "base_images": {"b": 1}}))
    with pytest.raises(UsageError, match=r"base_images\.b: "):
        load_manifest(path)


def test_credentials_lookup_by_host_and_errors_without_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps({"auths": {"https://r.example:5000/v1/": {"username": "u", "password": SECRET}}})
    )
    assert registry_credentials(path, "r.example:5000") == ("u", SECRET)
    assert registry_credentials(path, "other.example") is None
    path.write_text(json.dumps({"auths": {"r.example": {"auth": "not base64!"}}}))
    with pytest.raises(UsageError) as caught:
        registry_credentials(path, "r.example")
    assert "auths.r.example" in str(caught.value) and SECRET not in str(caught.value)
    path.write_text("[]")
    with pytest.raises(UsageError, match="no `auths` object"):
        registry_credentials(path, "r.example")


def test_split_reference() -> None:
    assert split_reference("host:5000/cage/cage/claude:abc") == ("host:5000", "cage/cage/claude", "abc")
    with pytest.raises(UsageError):
        split_reference("claude")


def test_the_chart_mounts_the_images_manifest_where_the_resolver_reads_it() -> None:
    from tests.golden.k8s.chart import render

    (deployment,) = [
        o
        for o in render({"sandboxes": {"imagesConfigMap": "team-images"}})
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "cage"
    ]
    pod = deployment["spec"]["template"]["spec"]
    (box,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in box["env"]}
    manifest = Path(env["CAGE_K8S_IMAGES_MANIFEST"])
    (mount,) = [m for m in box["volumeMounts"] if m["name"] == "images"]
    assert manifest.parent == Path(mount["mountPath"]) and mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == "images"]
    assert volume["configMap"]["name"] == "team-images"


async def test_a_ready_image_base_resolves_to_itself(registry: Registry, tmp_path: Path) -> None:
    ready_id = "sha256:" + "9" * 64
    settings = _settings(registry, tmp_path)
    manifest = ImagesManifest(
        registry=settings.k8s_registry,
        base_images={BASE_REF: BASE_ID, "acme/claude-ready:1": ready_id, "ghcr.io/acme/claude:2": ready_id},
        ready_images={"acme/claude-ready:1": "claude", "ghcr.io/acme/claude:2": "claude"},
    )
    resolver = RegistryImageResolver(settings, manifest=manifest)
    expected = ImageRef(tag="acme/claude-ready:1", image_hash="9" * 64)
    assert resolver.plan_tag(RUNNER_IMAGES["claude"], "acme/claude-ready:1") == expected
    with pytest.raises(
        ImageBuildError, match=rf"{registry.host}/cage/acme/claude-ready:1: not in the registry"
    ):
        await resolver.ensure("claude", base="acme/claude-ready:1")  # pushed under the registry prefix
    registry.present.add("cage/acme/claude-ready:1")
    assert await resolver.ensure("claude", base="acme/claude-ready:1") == expected
    asked = len(registry.requests)
    qualified = await resolver.ensure("claude", base="ghcr.io/acme/claude:2")  # pulled where it is
    assert qualified.tag == "ghcr.io/acme/claude:2" and len(registry.requests) == asked
    # another runner on a ready image of claude builds on it as on any base
    on_it = resolver.plan_tag(RUNNER_IMAGES["codex"], "acme/claude-ready:1")
    assert on_it.tag.startswith("cage/codex:")


async def test_a_base_not_pushed_names_the_push_with_it(registry: Registry, tmp_path: Path) -> None:
    resolver = RegistryImageResolver(_settings(registry, tmp_path))
    with pytest.raises(ImageBuildError, match=rf"--base {BASE_REF} --base acme/other:3`"):
        await resolver.ensure("claude", base="acme/other:3")
