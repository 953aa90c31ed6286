"""Runner images: the catalogue, the Dockerfiles' conventions, the `computer.image` rule, the context."""

from __future__ import annotations

import re
from pathlib import Path

import pydantic
import pytest

from orchestrator.dsl.sandbox import KNOWN_RUNNERS
from orchestrator.errors import ImageBuildError, UsageError
from orchestrator.sandbox.images import (
    EXTRA_CA_FILE,
    RUNNER_IMAGES,
    BaseImage,
    BuildProgress,
    ImageInfo,
    ImageRef,
    ProgressCallback,
    RunnerImage,
    build_runner_images,
    default_images_dir,
    extra_context_files,
    plan_build,
    project_root,
    ready_image,
    runner_image,
)

IMAGES = default_images_dir()
BASE = BaseImage(ref="cage/base:bookworm", id="sha256:" + "1" * 64)


def test_every_runner_has_an_image_folder_with_a_dockerfile() -> None:
    assert set(RUNNER_IMAGES) == set(KNOWN_RUNNERS)
    for image in RUNNER_IMAGES.values():
        assert (IMAGES / image.name / "Dockerfile").is_file(), image.name


@pytest.mark.parametrize("image", list(RUNNER_IMAGES.values()), ids=lambda i: i.name)
def test_dockerfile_follows_the_image_conventions(image: RunnerImage) -> None:
    text = (IMAGES / image.name / "Dockerfile").read_text()
    instructions = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert instructions[0] == "ARG BASE_IMAGE=debian:bookworm-slim"
    assert "FROM ${BASE_IMAGE}" in text
    assert "--uid 1000 --gid 1000 --home-dir /workspace" in text
    assert "install -d -o sandbox -g sandbox -m 0755 /workspace" in text
    assert "WORKDIR /workspace" in text and "USER sandbox" in text
    assert "procps" in text and "ca-certificates" in text
    assert "COPY cage-ca.sh extra-ca.pe[m] /tmp/cage-ca/" in text
    assert f"LABEL cage.runner={image.runner}" in text
    assert "cage.cli-version=" in text


@pytest.mark.parametrize("image", [i for i in RUNNER_IMAGES.values() if i.build_args], ids=lambda i: i.name)
def test_dockerfile_defaults_pin_the_same_versions_as_the_builder(image: RunnerImage) -> None:
    text = (IMAGES / image.name / "Dockerfile").read_text()
    for arg, value in image.build_args.items():
        assert re.search(rf"^ARG {arg}={re.escape(value)}$", text, re.MULTILINE), (arg, value)


def test_pinned_cli_versions_are_the_measured_ones() -> None:
    assert RUNNER_IMAGES["claude"].cli_version == "2.1.197"
    assert RUNNER_IMAGES["codex"].cli_version == "0.171.0"
    assert RUNNER_IMAGES["opencode"].cli_version == "1.18.33"


@pytest.mark.parametrize("image", list(RUNNER_IMAGES.values()), ids=lambda i: i.name)
def test_every_context_gets_the_one_shared_ca_script(image: RunnerImage) -> None:
    files = extra_context_files(image, extra_ca_certs=None, source_root=project_root())
    assert files["cage-ca.sh"] == (IMAGES / "common" / "cage-ca.sh").read_bytes()
    assert not (IMAGES / image.name / "cage-ca.sh").exists()  # one copy: the layer is shared


def test_runner_image_accepts_runner_names_aliases_and_image_names() -> None:
    assert runner_image("claude").name == "claude"
    assert runner_image("claude/cli").runner == "claude"
    assert runner_image("yao").name == "tools"
    assert runner_image("tools").runner == "yaocode"
    with pytest.raises(UsageError, match="unknown runner or image 'gemini'"):
        runner_image("gemini")


# --- the computer.image rule ---------------------------------------------------------------------


def test_an_image_labelled_for_the_runner_is_used_as_is() -> None:
    ready = BaseImage(ref="acme/claude-box:3", id="sha256:" + "f" * 64, labels={"cage.runner": "claude"})
    assert ready_image("claude", ready) == ImageRef(tag="acme/claude-box:3", image_hash="f" * 64)
    assert ready_image("claude-code", ready) == ImageRef(tag="acme/claude-box:3", image_hash="f" * 64)


def test_an_image_labelled_for_another_runner_or_unlabelled_is_a_base() -> None:
    other = BaseImage(ref="acme/box:1", id="sha256:" + "e" * 64, labels={"cage.runner": "codex"})
    plain = BaseImage(ref="ubuntu:24.04", id="sha256:" + "d" * 64, labels={"maintainer": "x"})
    assert ready_image("claude", other) is None
    assert ready_image("claude", plain) is None


def test_plan_builds_on_the_base_and_names_the_tag() -> None:
    plan = plan_build(RUNNER_IMAGES["claude"], BASE, images_dir=IMAGES, extra_files={})
    assert plan.tag == f"cage/claude:{plan.image_hash[:12]}"
    assert plan.build_args["BASE_IMAGE"] == "cage/base:bookworm"
    assert plan.build_args["CLAUDE_CODE_VERSION"] == "2.1.197"
    assert plan.labels["cage.image-hash"] == plan.image_hash
    assert plan.labels["cage.managed"] == "true"


def test_plan_hash_follows_the_base_id_not_its_name() -> None:
    image = RUNNER_IMAGES["yaocode"]
    plan = plan_build(image, BASE, images_dir=IMAGES, extra_files={})
    renamed_base = BASE.model_copy(update={"ref": "debian:bookworm-slim"})
    rebuilt_base = BASE.model_copy(update={"id": "sha256:" + "2" * 64})
    renamed = plan_build(image, renamed_base, images_dir=IMAGES, extra_files={})
    rebuilt = plan_build(image, rebuilt_base, images_dir=IMAGES, extra_files={})
    assert renamed.image_hash == plan.image_hash
    assert rebuilt.image_hash != plan.image_hash


def test_each_runner_gets_its_own_tag() -> None:
    tags = {plan_build(i, BASE, images_dir=IMAGES, extra_files={}).tag for i in RUNNER_IMAGES.values()}
    repos = {t.split(":")[0] for t in tags}
    assert repos == {"cage/claude", "cage/codex", "cage/opencode", "cage/tools", "cage/tai"}


# --- build context -------------------------------------------------------------------------------


def test_extra_ca_bundle_goes_into_the_context_and_the_hash(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    image = RUNNER_IMAGES["yaocode"]
    files = extra_context_files(image, extra_ca_certs=bundle)
    common = extra_context_files(image, extra_ca_certs=None)
    assert files == {**common, EXTRA_CA_FILE: bundle.read_bytes()}
    without = plan_build(image, BASE, images_dir=IMAGES, extra_files={})
    with_ca = plan_build(image, BASE, images_dir=IMAGES, extra_files=files)
    assert with_ca.image_hash != without.image_hash
    assert EXTRA_CA_FILE not in common


def test_a_missing_extra_ca_bundle_is_a_build_error(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match="extra CA bundle"):
        extra_context_files(RUNNER_IMAGES["claude"], extra_ca_certs=tmp_path / "nope.pem")


def _fake_source(root: Path) -> Path:
    (root / "orchestrator" / "__pycache__").mkdir(parents=True)
    (root / "runners" / "tai").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname='cage'\n")
    (root / "requirements-runtime.lock").write_text("anyio==4.16.0\n")
    (root / "README.md").write_text("# docs that do not belong in the image hash\n")
    (root / "orchestrator" / "__init__.py").write_text("")
    (root / "orchestrator" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (root / "runners" / "tai" / "cli.py").write_text("def main() -> None: ...\n")
    return root


def test_tai_context_carries_the_project_source_without_caches(tmp_path: Path) -> None:
    root = _fake_source(tmp_path)
    files = extra_context_files(RUNNER_IMAGES["tai"], extra_ca_certs=None, source_root=root)
    assert set(files) == {
        "cage-ca.sh",
        "src/pyproject.toml",
        "src/requirements-runtime.lock",
        "src/README.md",
        "src/orchestrator/__init__.py",
        "src/runners/tai/cli.py",
    }
    assert files["src/README.md"] == b""
    before = plan_build(RUNNER_IMAGES["tai"], BASE, images_dir=IMAGES, extra_files=files).image_hash
    (root / "runners" / "tai" / "cli.py").write_text("def main() -> None: print('v2')\n")
    files2 = extra_context_files(RUNNER_IMAGES["tai"], extra_ca_certs=None, source_root=root)
    assert plan_build(RUNNER_IMAGES["tai"], BASE, images_dir=IMAGES, extra_files=files2).image_hash != before


def test_tai_context_needs_the_source_tree(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match=r"pyproject\.toml"):
        extra_context_files(RUNNER_IMAGES["tai"], extra_ca_certs=None, source_root=tmp_path)


def test_real_tai_context_includes_this_package() -> None:
    files = extra_context_files(RUNNER_IMAGES["tai"], extra_ca_certs=None)
    assert "src/orchestrator/sandbox/images.py" in files
    assert not any("__pycache__" in name for name in files)


# --- models and the generic build loop -----------------------------------------------------------


def test_cross_layer_models_are_frozen_and_strict() -> None:
    ref = ImageRef(tag="cage/tools:abc", image_hash="abc")
    with pytest.raises(pydantic.ValidationError):
        ref.tag = "x"
    with pytest.raises(pydantic.ValidationError):
        BuildProgress(tag="t", phase="compiling")
    with pytest.raises(pydantic.ValidationError):
        ImageInfo.model_validate(
            {
                "tag": "t",
                "runner": "r",
                "image_hash": "h",
                "id": "i",
                "size": 1,
                "created": "2026-01-01T00:00:00Z",
                "colour": "red",
            }
        )


class FakeBuilder:
    """Records which runners were built; satisfies `ImageBuilder`."""

    def __init__(self) -> None:
        self.built: list[tuple[str, bool]] = []

    async def ensure(
        self, runner: str, *, base: str | None = None, on_progress: ProgressCallback | None = None
    ) -> ImageRef:
        return await self.build(runner, on_progress=on_progress)

    async def build(
        self, runner: str, *, force: bool = False, on_progress: ProgressCallback | None = None
    ) -> ImageRef:
        self.built.append((runner, force))
        tag = f"cage/{runner_image(runner).name}:000000000000"
        if on_progress is not None:
            await on_progress(BuildProgress(tag=tag, phase="done"))
        return ImageRef(tag=tag, image_hash="0" * 64)

    async def list_images(self) -> list[ImageInfo]:
        return []

    async def prune(self, keep_in_use: set[str]) -> list[str]:
        return []


async def test_build_runner_images_builds_all_or_the_named_ones_in_order() -> None:
    builder = FakeBuilder()
    seen: list[str] = []

    async def progress(p: BuildProgress) -> None:
        seen.append(p.tag)

    refs = await build_runner_images(builder, on_progress=progress)
    assert [r for r, _ in builder.built] == list(RUNNER_IMAGES)
    assert len(refs) == len(seen) == 5
    builder.built.clear()
    refs = await build_runner_images(builder, ["tools", "claude"], force=True)
    assert builder.built == [("yaocode", True), ("claude", True)]
    assert [r.tag for r in refs] == ["cage/tools:000000000000", "cage/claude:000000000000"]
