"""Building runner images for real: the tools image, caching, one build per tag, failures."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import docker
import pytest

from orchestrator.errors import ImageBuildError
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.images import BuildProgress, ImageRef
from orchestrator.settings import Settings
from tests.integration.images.conftest import run_in

pytestmark = pytest.mark.docker


class Recorder:
    """Collects progress reports."""

    def __init__(self) -> None:
        self.events: list[BuildProgress] = []

    async def __call__(self, progress: BuildProgress) -> None:
        self.events.append(progress)

    def phases(self) -> list[str]:
        return [e.phase for e in self.events if e.phase != "step"]


@pytest.fixture(scope="module")
def tools_image(builder: DockerImageBuilder) -> ImageRef:
    return anyio.run(lambda: builder.ensure("yaocode"))


async def test_tools_image_has_the_sandbox_user_and_the_tools(
    tools_image: ImageRef, image_docker: docker.DockerClient
) -> None:
    assert tools_image.tag.startswith("cage/tools:")
    assert tools_image.tag.endswith(tools_image.image_hash[:12])
    out = run_in(
        image_docker,
        tools_image.tag,
        "id -un; id -u; id -g; pwd; echo ~; "
        "for t in rg git python3 ps pkill find bash; do command -v $t; done",
    )
    lines = out.split()
    assert lines[:5] == ["sandbox", "1000", "1000", "/workspace", "/workspace"]
    assert [Path(p).name for p in lines[5:]] == ["rg", "git", "python3", "ps", "pkill", "find", "bash"]
    labels = image_docker.images.get(tools_image.tag).labels
    assert labels["cage.runner"] == "yaocode"
    assert labels["cage.image-hash"] == tools_image.image_hash
    assert labels["cage.managed"] == "true"


async def test_workspace_starts_empty_and_owned_by_sandbox(
    tools_image: ImageRef, image_docker: docker.DockerClient
) -> None:
    out = run_in(image_docker, tools_image.tag, "ls -A /workspace | wc -l; stat -c %U:%G /workspace")
    assert out.split() == ["0", "sandbox:sandbox"]


async def test_extra_ca_bundle_is_installed_when_configured(
    tools_image: ImageRef, image_docker: docker.DockerClient, image_settings: Settings
) -> None:
    out = run_in(image_docker, tools_image.tag, "ls /usr/local/share/ca-certificates/cage-extra | wc -l")
    expected_any = image_settings.extra_ca_certs is not None
    assert (int(out.strip()) > 0) is expected_any


async def test_second_ensure_is_cached_and_fast(tools_image: ImageRef, builder: DockerImageBuilder) -> None:
    recorder = Recorder()
    started = time.monotonic()
    again = await builder.ensure("yaocode", on_progress=recorder)
    elapsed = time.monotonic() - started
    assert again == tools_image
    assert recorder.phases() == ["cached"]
    assert elapsed < 3.0


async def test_an_image_labelled_for_the_runner_is_used_as_is(
    tools_image: ImageRef, builder: DockerImageBuilder, image_docker: docker.DockerClient
) -> None:
    recorder = Recorder()
    ref = await builder.ensure("yao", base=tools_image.tag, on_progress=recorder)
    image_id = image_docker.images.get(tools_image.tag).id
    assert ref == ImageRef(tag=tools_image.tag, image_hash=image_id.removeprefix("sha256:"))
    assert recorder.phases() == ["cached"]


async def test_list_images_reports_the_tools_image(
    tools_image: ImageRef, builder: DockerImageBuilder
) -> None:
    infos = {i.tag: i for i in await builder.list_images()}
    info = infos[tools_image.tag]
    assert info.runner == "yaocode"
    assert info.image_hash == tools_image.image_hash
    assert info.cli_version == "none"
    assert info.size > 50_000_000


async def test_concurrent_ensure_builds_once(
    scratch_images: Path, image_docker: docker.DockerClient, image_settings: Settings
) -> None:
    one = DockerImageBuilder(image_docker, settings=image_settings, images_dir=scratch_images)
    recorder = Recorder()
    results: list[ImageRef] = []

    async def call() -> None:
        results.append(await one.ensure("yaocode", on_progress=recorder))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        tg.start_soon(call)
    assert results[0] == results[1]
    assert sorted(recorder.phases()) == ["building", "cached", "done"]
    assert image_docker.images.get(results[0].tag).labels["cage.runner"] == "yaocode"


async def test_two_builders_sharing_a_data_dir_build_once(
    scratch_images: Path, image_docker: docker.DockerClient, image_settings: Settings
) -> None:
    """Two builder instances stand for two `cage` processes: only the file lock keeps them apart."""
    builders = [
        DockerImageBuilder(image_docker, settings=image_settings, images_dir=scratch_images) for _ in "ab"
    ]
    recorder = Recorder()
    results: list[ImageRef] = []

    async def call(b: DockerImageBuilder) -> None:
        results.append(await b.ensure("yaocode", on_progress=recorder))

    async with anyio.create_task_group() as tg:
        for b in builders:
            tg.start_soon(call, b)
    assert results[0] == results[1]
    assert recorder.phases().count("building") == 1
    assert sorted(recorder.phases()) == ["building", "cached", "done"]


async def test_build_streams_steps_and_prune_removes_stale_tags(
    scratch_images: Path,
    image_docker: docker.DockerClient,
    image_settings: Settings,
    builder: DockerImageBuilder,
) -> None:
    scratch = DockerImageBuilder(image_docker, settings=image_settings, images_dir=scratch_images)
    recorder = Recorder()
    ref = await scratch.build("tools", on_progress=recorder)
    steps = [e.message for e in recorder.events if e.phase == "step"]
    assert any(s.startswith("Step 1/") for s in steps)
    assert any("sleep 2" in s for s in steps)
    before = {i.tag for i in await builder.list_images()}
    assert ref.tag in before
    # Keep everything else (other tests and people share this engine); only the scratch tag is stale.
    removed = await builder.prune(keep_in_use=before - {ref.tag})
    assert removed == [ref.tag]
    assert ref.tag not in {i.tag for i in await builder.list_images()}


async def test_a_broken_dockerfile_raises_with_the_log_tail(
    tmp_path: Path, image_docker: docker.DockerClient, image_settings: Settings
) -> None:
    folder = tmp_path / "images" / "tools"
    folder.mkdir(parents=True)
    lines = "".join(f"echo line-{n}; " for n in range(40))
    (folder / "Dockerfile").write_text(
        f"ARG BASE_IMAGE=debian:bookworm-slim\nFROM ${{BASE_IMAGE}}\nRUN {lines} echo about-to-fail; exit 3\n"
    )
    broken = DockerImageBuilder(image_docker, settings=image_settings, images_dir=folder.parent)
    recorder = Recorder()
    with pytest.raises(ImageBuildError) as info:
        await broken.ensure("yaocode", on_progress=recorder)
    tail = info.value.log_tail.splitlines()
    assert len(tail) <= 31
    assert "about-to-fail" in info.value.log_tail
    assert "line-39" in info.value.log_tail
    assert "line-0\n" not in info.value.log_tail + "\n"
    assert "returned a non-zero code: 3" in tail[-1]
    assert info.value.image.startswith("cage/tools:")
    assert recorder.phases() == ["building", "error"]
    assert not image_docker.images.list(name=info.value.image)


async def test_a_missing_offline_base_image_says_how_to_build_it(builder: DockerImageBuilder) -> None:
    # Cage's own namespace is never pulled (docker.io/cage is not ours): the error names the fix.
    with pytest.raises(ImageBuildError, match="offline base image is not built: run `make base-image`"):
        await builder.ensure("yaocode", base="cage/no-such-base:never")


async def test_a_base_image_that_cannot_be_pulled_is_a_build_error(builder: DockerImageBuilder) -> None:
    with pytest.raises(ImageBuildError, match="base image not found and cannot be pulled"):
        await builder.ensure("yaocode", base="127.0.0.1:1/no-such-base:never")
