"""The orchestrator image (the top-level Dockerfile) as the tests build it.

`make test` builds it once before the test passes (`python -m tests.orchestrator_image`), tagged
`PREBUILT`, as it builds the runner images: the pip install of the locked packages takes minutes on a
loaded machine and does not belong inside a test's time limit. The image test then builds its own tag
from the very same context, which the engine's layer cache answers at once.
"""

from __future__ import annotations

import io
import os
import sys
import tarfile
from collections.abc import Mapping
from pathlib import Path

import docker

from orchestrator.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
CONTEXT = (
    "Dockerfile",
    "pyproject.toml",
    "requirements-runtime.lock",
    "README.md",
    "agent.yml",
    "orchestrator",
    "runners",
    "images",
    "assistants",
    "connectors",
    "mcps",
)
SKIP = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
PREBUILT = "cage-test/orchestrator:prebuilt"


def build_context() -> io.BytesIO:
    """What `docker build .` sends (per .dockerignore), plus `extra-ca.pem`: the CA bundle runner images
    get too (`Settings.extra_ca_certs`, the host's system bundle unless CAGE_EXTRA_CA_CERTS says otherwise)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in CONTEXT:
            for path in [ROOT / name, *sorted((ROOT / name).rglob("*"))]:
                if (
                    (path.is_file() or path.is_symlink())
                    and not SKIP.intersection(path.parts)
                    and path.suffix != ".pyc"
                ):
                    tar.add(path, arcname=str(path.relative_to(ROOT)), recursive=False)
        ca = Settings().extra_ca_certs
        if ca is not None:
            tar.add(ca, arcname="extra-ca.pem")
    buffer.seek(0)
    return buffer


def build(client: docker.DockerClient, tag: str, labels: Mapping[str, str] | None = None) -> None:
    """Build the orchestrator image on the offline base (or `CAGE_BASE_IMAGE`) as `tag`."""
    client.images.build(
        fileobj=build_context(),
        custom_context=True,
        tag=tag,
        buildargs={"BASE_IMAGE": os.environ.get("CAGE_BASE_IMAGE", "cage/base:bookworm")},
        rm=True,
        forcerm=True,
        labels=dict(labels or {}),
    )


def main() -> int:
    client = docker.from_env()
    try:
        build(client, PREBUILT)
    except docker.errors.BuildError as exc:
        print(f"cage: the orchestrator image did not build: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    print(PREBUILT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
