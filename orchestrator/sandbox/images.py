"""Runner images: which image each runner needs, how it is identified, and the builder interface.

No engine here: `ImageBuilder` is the Protocol the sandbox manager and the admin API code against;
`orchestrator.sandbox.docker.builder.DockerImageBuilder` implements it on Docker.

The `computer.image` rule (images/README.md): an image that already carries the label
`cage.runner=<runner>` is used as-is; any other image becomes the `BASE_IMAGE` of the runner layer;
no `computer.image` means `Settings.base_image`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.attribute_docs import describe_fields
from orchestrator.dsl.sandbox import KNOWN_RUNNERS, canonical_runner
from orchestrator.errors import ImageBuildError, UsageError
from orchestrator.sandbox.hashing import image_hash, image_tag

_FROZEN = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)

RUNNER_LABEL = "cage.runner"
"""Image label naming the runner an image is ready for; the key of the `computer.image` rule."""
CLI_VERSION_LABEL = "cage.cli-version"
IMAGE_HASH_LABEL = "cage.image-hash"
MANAGED_LABEL = "cage.managed"
EXTRA_CA_FILE = "extra-ca.pem"
"""Name of the optional CA bundle in a build context (see the Dockerfiles)."""
COMMON_DIR = "common"
"""Folder of `images/` whose files go into every runner image's context (`cage-ca.sh`)."""
SOURCE_DIR = "src"
RUNTIME_LOCK = "requirements-runtime.lock"
"""The pinned runtime packages (with hashes) the `tai` image installs, as the orchestrator image does."""
"""Context folder holding Cage's own source for the `tai` image."""

CLAUDE_CODE_VERSION = "2.1.197"
CODEX_VERSION = "0.171.0"
OPENCODE_VERSION = "1.18.33"
CAGE_VERSION = "0.1.0"


class RunnerImage(BaseModel):
    """One runner image: its folder under `images/`, its build args and the CLI it pins."""

    model_config = _FROZEN
    runner: str
    """Runner name (`claude`, `opencode`, `codex`, `yaocode`, `tai`); the `cage.runner` label."""
    name: str
    """Folder under `images/` and repository of the tag `cage/<name>:<hash12>`."""
    cli_version: str
    """Version of the CLI inside; `none` for the tools-only image."""
    build_args: Mapping[str, str] = Field(default_factory=dict)
    """Build args besides `BASE_IMAGE` (they pin the CLI versions); part of the image hash."""
    needs_source: bool = False
    """The context must carry Cage's own source (`pyproject.toml`, `orchestrator/`, `runners/`)."""


RUNNER_IMAGES: Mapping[str, RunnerImage] = {
    image.runner: image
    for image in (
        RunnerImage(
            runner="claude",
            name="claude",
            cli_version=CLAUDE_CODE_VERSION,
            build_args={"CLAUDE_CODE_VERSION": CLAUDE_CODE_VERSION},
        ),
        RunnerImage(
            runner="codex",
            name="codex",
            cli_version=CODEX_VERSION,
            build_args={"CODEX_VERSION": CODEX_VERSION},
        ),
        RunnerImage(
            runner="opencode",
            name="opencode",
            cli_version=OPENCODE_VERSION,
            build_args={"OPENCODE_VERSION": OPENCODE_VERSION},
        ),
        RunnerImage(runner="yaocode", name="tools", cli_version="none"),
        RunnerImage(
            runner="tai",
            name="tai",
            cli_version=CAGE_VERSION,
            build_args={"CAGE_VERSION": CAGE_VERSION},
            needs_source=True,
        ),
    )
}
assert set(RUNNER_IMAGES) == set(KNOWN_RUNNERS), "every runner needs an image"

EGRESS_IMAGE = RunnerImage(runner="egress", name="egress", cli_version="squid")
"""The egress proxy (`images/egress/`): built by the same builder, never a runner, never pruned
(its Dockerfile labels it `cage.image=egress`, not `cage.runner`)."""


def runner_image(name: str) -> RunnerImage:
    """The image for a runner name (Yao aliases accepted) or an image name (`tools`).

    Raises:
        UsageError: no such runner or image.
    """
    runner = canonical_runner(name)
    if runner in RUNNER_IMAGES:
        return RUNNER_IMAGES[runner]
    for image in RUNNER_IMAGES.values():
        if image.name == name:
            return image
    known = ", ".join(sorted({*RUNNER_IMAGES, *(i.name for i in RUNNER_IMAGES.values())}))
    raise UsageError(f"unknown runner or image {name!r}; expected one of {known}")


class ImageRef(BaseModel):
    """A runner image ready to start containers from."""

    model_config = _FROZEN
    tag: str
    """What to pass to the engine: `cage/<name>:<hash12>`, or a ready `computer.image` as given."""
    image_hash: str
    """Full image hash (sha256 hex); for a ready image, its image id. Feeds the config hash."""


class BuildProgress(BaseModel):
    """One progress report of `ImageBuilder.ensure`: cached, building, a build output line, done, error."""

    model_config = _FROZEN
    tag: str
    phase: Literal["cached", "building", "step", "done", "error"]
    message: str = ""


class ImageInfo(BaseModel):
    """A Cage-built runner image as the admin API lists it."""

    model_config = _FROZEN
    tag: str
    runner: str
    image_hash: str
    """Full hash from the `cage.image-hash` label (the tag carries its first 12 hex digits)."""
    id: str
    size: int
    """Bytes, as the engine reports it."""
    created: datetime
    cli_version: str | None = None


class BaseImage(BaseModel):
    """A base (or ready) image as found in the engine: the reference asked for, its id and labels."""

    model_config = _FROZEN
    ref: str
    id: str
    labels: Mapping[str, str] = Field(default_factory=dict)


class BuildPlan(BaseModel):
    """What to build for a runner on a given base: tag, hash and build args (no file contents)."""

    model_config = _FROZEN
    image: RunnerImage
    base: BaseImage
    tag: str
    image_hash: str
    build_args: Mapping[str, str]
    """All build args passed to the engine, `BASE_IMAGE` included."""
    labels: Mapping[str, str]
    """Labels the builder adds on top of the Dockerfile's own."""


IMAGES_MANIFEST_KIND: Literal["cage.images/v1"] = "cage.images/v1"


class ImagesManifest(BaseModel):
    """What `cage images push --manifest FILE` writes and the registry resolver reads: the pushed
    tags and the id of each base image they were built on (the one hash input only an engine knows).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["cage.images/v1"] = IMAGES_MANIFEST_KIND
    registry: str
    """Registry prefix the images were pushed under (`CAGE_K8S_REGISTRY`)."""
    base_images: Mapping[str, str]
    """Base image reference (`CAGE_BASE_IMAGE`, each `cage images push --base`) -> its image id
    (`sha256:...`), as Docker had it."""
    ready_images: Mapping[str, str] = Field(default_factory=dict)
    """Base reference -> the runner it is a ready image of (labelled `cage.runner`): a
    `computer.image` that names it runs that runner on it as is (`ready_image`)."""
    images: Mapping[str, str] = Field(default_factory=dict)
    """Pushed tag (`cage/<name>:<hash12>`) -> the reference pods pull (`<registry>/<tag>`)."""


ProgressCallback = Callable[[BuildProgress], Awaitable[None]]


class ImageBuilder(Protocol):
    """Builds (or finds) the image for a runner. Implementations build each tag at most once."""

    async def aclose(self) -> None:
        """Close the engine or registry client it opened (idempotent)."""
        ...

    async def ensure(
        self, runner: str, *, base: str | None = None, on_progress: ProgressCallback | None = None
    ) -> ImageRef:
        """The image for `runner` on `base` (`computer.image`; None = the default base), built if missing.

        Raises:
            ImageBuildError: the build failed (with the log tail) or the base image is missing.
            EngineUnavailable: no engine answers.
        """
        ...

    async def build(
        self, runner: str, *, force: bool = False, on_progress: ProgressCallback | None = None
    ) -> ImageRef:
        """Build the image for `runner` on the default base; `force` rebuilds without the layer cache."""
        ...

    async def list_images(self) -> list[ImageInfo]:
        """Every Cage-built runner image present in the engine."""
        ...

    async def prune(self, keep_in_use: set[str]) -> list[str]:
        """Remove Cage-built images that are neither current nor in `keep_in_use`; return their tags."""
        ...


def ready_image(runner: str, base: BaseImage) -> ImageRef | None:
    """The `computer.image` rule: `base` itself when it is labelled for `runner`, else None."""
    if base.labels.get(RUNNER_LABEL) == canonical_runner(runner):
        return ImageRef(tag=base.ref, image_hash=base.id.removeprefix("sha256:"))
    return None


def plan_build(
    image: RunnerImage, base: BaseImage, *, images_dir: Path, extra_files: Mapping[str, bytes]
) -> BuildPlan:
    """Hash the context of `image` on `base` and name the tag. Reads the image's folder."""
    digest = image_hash(
        images_dir / image.name, base_image_id=base.id, build_args=image.build_args, extra_files=extra_files
    )
    return BuildPlan(
        image=image,
        base=base,
        tag=image_tag(image.name, digest),
        image_hash=digest,
        build_args={**image.build_args, "BASE_IMAGE": base.ref},
        labels={MANAGED_LABEL: "true", IMAGE_HASH_LABEL: digest},
    )


def default_images_dir() -> Path:
    """The runner image contexts: `orchestrator/images`, package data of an installed wheel.

    In a source checkout that path is a symlink to the top-level `images/` folder.
    """
    return Path(__file__).resolve().parents[1] / "images"


OFFLINE_BASE_PREFIX = "cage/"
"""Base images named `cage/...` are built on this machine (`images/base/build.sh`), never pulled:
`docker.io/cage` is not Cage's namespace."""

_TLS_MARKERS = (
    "certificate verify failed",
    "unable to get local issuer certificate",
    "self signed certificate",
    "self-signed certificate",
    "unable_to_get_issuer_cert",
    "unable_to_verify_leaf_signature",
    "self_signed_cert_in_chain",
    "cert_untrusted",
    "x509:",
    "sslerror",
    "ssl certificate problem",
)


def tls_hint(log_tail: str, extra_ca_certs: Path | None) -> str | None:
    """What to do when a build failed on a TLS certificate (a network with TLS inspection), or None."""
    text = log_tail.lower()
    if not any(marker in text for marker in _TLS_MARKERS):
        return None
    if extra_ca_certs is None:
        return (
            "hint: the build failed on a TLS certificate; behind a TLS-inspecting proxy set "
            "CAGE_EXTRA_CA_CERTS to a PEM bundle holding its CA (e.g. /etc/ssl/certs/ca-certificates.crt)"
        )
    return (
        f"hint: the build failed on a TLS certificate although CAGE_EXTRA_CA_CERTS={extra_ca_certs} is "
        "installed in the image; add the proxy's CA certificate to that bundle"
    )


def project_root() -> Path:
    """The source checkout holding this package (`pyproject.toml`, `orchestrator/`, `runners/`)."""
    return Path(__file__).resolve().parents[2]


_SKIP_PARTS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def _source_files(root: Path) -> dict[str, bytes]:
    """Cage's own installable source under `src/`: what `pip install` needs for the `tai` image."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        raise ImageBuildError(
            "cage/tai", f"the tai image is built from Cage's source, but {pyproject} does not exist"
        )
    # pyproject's `readme` must exist for setuptools. An empty one is enough inside the image and
    # keeps documentation edits from changing the image hash.
    files = {f"{SOURCE_DIR}/pyproject.toml": pyproject.read_bytes(), f"{SOURCE_DIR}/README.md": b""}
    lock = root / RUNTIME_LOCK
    if not lock.is_file():
        raise ImageBuildError("cage/tai", f"the tai image installs the locked packages of {lock}: missing")
    files[f"{SOURCE_DIR}/{RUNTIME_LOCK}"] = lock.read_bytes()
    for package in ("orchestrator", "runners"):
        for path in sorted((root / package).rglob("*")):
            rel = path.relative_to(root)
            if path.is_file() and not _SKIP_PARTS.intersection(rel.parts) and path.suffix != ".pyc":
                files[f"{SOURCE_DIR}/{rel.as_posix()}"] = path.read_bytes()
    return files


def extra_context_files(
    image: RunnerImage,
    *,
    extra_ca_certs: Path | None,
    source_root: Path | None = None,
    images_dir: Path | None = None,
) -> dict[str, bytes]:
    """Files the builder adds to the image's folder: the shared scripts of `images/common/`, the
    extra CA bundle, and, for `tai`, the source.

    Blocking (reads files): call it from a worker thread in async code.

    Raises:
        ImageBuildError: a configured CA bundle or the source tree is missing.
    """
    common = (images_dir or default_images_dir()) / COMMON_DIR
    shared = sorted(common.iterdir()) if common.is_dir() else []  # a custom images dir may have none
    files: dict[str, bytes] = {p.name: p.read_bytes() for p in shared if p.is_file()}
    if extra_ca_certs is not None:
        if not extra_ca_certs.is_file():
            raise ImageBuildError(f"cage/{image.name}", f"extra CA bundle {extra_ca_certs} is not a file")
        files[EXTRA_CA_FILE] = extra_ca_certs.read_bytes()
    if image.needs_source:
        files.update(_source_files(source_root or project_root()))
    return files


async def build_runner_images(
    builder: ImageBuilder,
    names: Iterable[str] | None = None,
    *,
    force: bool = False,
    on_progress: ProgressCallback | None = None,
) -> list[ImageRef]:
    """Build the images of `names` (runner or image names; None = all), one after the other."""
    images = [runner_image(n) for n in names] if names is not None else list(RUNNER_IMAGES.values())
    return [await builder.build(image.runner, force=force, on_progress=on_progress) for image in images]
