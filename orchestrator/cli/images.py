"""`cage images`: build, push, list and prune the runner images, with a live progress display."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import anyio
import typer
from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from orchestrator.cli.listing import JsonOption, print_rows
from orchestrator.sandbox.engines import engine_clients
from orchestrator.sandbox.images import RUNNER_IMAGES, BuildProgress, ImageBuilder
from orchestrator.settings import Settings

T = TypeVar("T")
app = typer.Typer(
    help="Build, push, list and prune the runner images.", no_args_is_help=True, add_completion=False
)


class BuildDisplay:
    """One line per image: a spinner with the current build step while building, then the outcome."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.rows: dict[str, tuple[str, str]] = {}
        self.live = Live(self._render(), console=console, refresh_per_second=8, transient=False)

    def _render(self) -> Table:
        table = Table.grid(padding=(0, 1))
        for tag, (phase, message) in self.rows.items():
            mark: Spinner | Text
            if phase in ("building", "step"):
                mark = Spinner("dots")
            else:
                mark = Text(
                    "✓" if phase in ("done", "cached") else "✗", style="green" if phase != "error" else "red"
                )
            table.add_row(
                mark, Text(tag, style="bold"), Text(message[-100:], style="dim", overflow="ellipsis")
            )
        return table

    async def __call__(self, progress: BuildProgress) -> None:
        self.rows[progress.tag] = (progress.phase, progress.message.strip())
        self.live.update(self._render())


@app.command("build")
def build(
    runners: Annotated[list[str] | None, typer.Argument(help="Runner or image names (default: all).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Build every runner image.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the tag exists.")] = False,
) -> None:
    """Build runner images (only those whose hash-tag is missing, unless --force)."""
    from orchestrator.sandbox.docker.builder import build_all

    names = None if all_ or not runners else list(runners)
    settings = Settings()
    console = Console(stderr=True)
    display = BuildDisplay(console)
    with display.live:
        refs = anyio.run(lambda: build_all(settings, display, names=names, force=force))
    for ref in refs:
        typer.echo(ref.tag)


@app.command("push")
def push(
    runners: Annotated[list[str] | None, typer.Argument(help="Runner or image names (default: all).")] = None,
    registry: Annotated[
        str | None, typer.Option("--registry", help="Target registry (default: CAGE_K8S_REGISTRY).")
    ] = None,
    manifest: Annotated[
        Path | None,
        typer.Option(
            "--manifest",
            help="Write the images manifest (tags and base image ids) the Kubernetes backend resolves with "
            "(CAGE_K8S_IMAGES_MANIFEST).",
        ),
    ] = None,
    bases: Annotated[
        list[str] | None,
        typer.Option(
            "--base",
            help="A base image (a `computer.image`) to build and push the runner images on; repeat it for "
            "several (default: CAGE_BASE_IMAGE only). A base labelled cage.runner is pushed as is.",
        ),
    ] = None,
) -> None:
    """Build (or find) runner images on each base, tag them `<registry>/<tag>` and push them there:
    the images the Kubernetes backend's pods pull (`docs/deploy.md`). `--manifest FILE` also writes
    what those pods need to find them without Docker: the pushed tags and every base's image id."""
    from orchestrator.errors import CageError
    from orchestrator.sandbox.docker.push import PushSet, images_for_bases, push_images
    from orchestrator.sandbox.images import ImagesManifest

    settings = Settings()
    target = registry if registry is not None else settings.k8s_registry
    console = Console(stderr=True)
    display = BuildDisplay(console)

    async def run() -> tuple[PushSet, dict[str, str]]:
        with display.live:
            found = await images_for_bases(
                settings,
                bases or [settings.base_image],
                names=list(runners) if runners else None,
                on_progress=display,
            )
        return found, await push_images(settings, found.tags, target)

    try:
        found, pushed = anyio.run(run)
    except CageError as exc:
        console.print(f"[red]cage images push: {exc}[/red]")
        raise typer.Exit(1) from None
    for ref in pushed.values():
        typer.echo(ref)
    if manifest is not None:
        document = ImagesManifest(
            registry=target,
            base_images=found.base_images,
            ready_images=found.ready_images,
            images=pushed,
        )
        manifest.write_text(document.model_dump_json(indent=2) + "\n", encoding="utf-8")
        console.print(f"images manifest written to {manifest} (CAGE_K8S_IMAGES_MANIFEST)")


async def _with_images(work: Callable[[ImageBuilder], Awaitable[T]]) -> T:
    """`work` on the engine's image builder; the engine's clients are closed after it."""
    backend, images = engine_clients(Settings())
    try:
        return await work(images)
    finally:
        await images.aclose()
        await backend.aclose()


@app.command("list")
def list_images(as_json: JsonOption = False) -> None:
    """The Cage-built runner images on the engine."""
    infos = anyio.run(_with_images, lambda images: images.list_images())
    rows = [
        {
            "tag": info.tag,
            "runner": info.runner,
            "cli_version": info.cli_version,
            "size": info.size if as_json else f"{info.size / 2**20:.0f} MiB",
            "created": info.created.isoformat() if as_json else info.created.strftime("%Y-%m-%d %H:%M"),
        }
        for info in sorted(infos, key=lambda i: (i.runner, i.created))
    ]
    print_rows(rows, ("tag", "runner", "cli version", "size", "created"), as_json=as_json, no_wrap=("tag",))


@app.command("prune")
def prune() -> None:
    """Remove runner images of outdated hashes (images of the current hashes stay)."""
    removed = anyio.run(_with_images, lambda images: images.prune(set()))
    for tag in removed:
        typer.echo(f"removed {tag}")
    if not removed:
        typer.echo(f"nothing to prune ({len(RUNNER_IMAGES)} runners)")
