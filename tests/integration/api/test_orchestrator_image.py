"""The orchestrator image builds and serves, started the way compose.yaml starts it: engine socket
mounted, a named data volume, the compose environment, the socket's group added."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
import yaml

from tests.integration.conftest import TEST_RUN_ID, TEST_RUN_LABEL
from tests.orchestrator_image import build
from tests.serving import reserve_port

ROOT = Path(__file__).resolve().parents[3]
_DEFAULT = re.compile(r"\$\{(\w+):-([^}]*)\}")

pytestmark = pytest.mark.slow


def compose_service() -> dict[str, Any]:
    """The `cage` service of compose.yaml with `${VAR:-default}` resolved to the defaults."""
    text = _DEFAULT.sub(lambda m: m.group(2), (ROOT / "compose.yaml").read_text())
    service: dict[str, Any] = yaml.safe_load(text)["services"]["cage"]
    return service


@pytest.fixture(scope="module")
def orchestrator_image(docker_engine: docker.DockerClient) -> Iterator[str]:
    tag = f"cage-test/orchestrator:{TEST_RUN_ID[:12]}"
    build(docker_engine, tag, {TEST_RUN_LABEL: TEST_RUN_ID})  # cached when make test built PREBUILT
    yield tag
    docker_engine.images.remove(tag, force=True)


def test_the_image_answers_healthz_when_started_like_compose(
    docker_engine: docker.DockerClient, orchestrator_image: str
) -> None:
    service = compose_service()
    sock = "/var/run/docker.sock"
    mounts = [v for v in service["volumes"] if not v.lstrip().startswith("#")]
    assert f"{sock}:{sock}" in mounts and "cage-data:/data" in mounts
    environment = {
        **service["environment"],
        "CAGE_BOOTSTRAP_ADMIN_KEY": "boot-key-for-the-image-test",
        # reconcile only sandboxes of this test run: the engine is shared
        "CAGE_SANDBOX_LABELS": f'{{"{TEST_RUN_LABEL}": "{TEST_RUN_ID}"}}',
    }
    volume = docker_engine.volumes.create(
        f"cage-test-data-{TEST_RUN_ID[:12]}", labels={TEST_RUN_LABEL: TEST_RUN_ID}
    )
    port = reserve_port()
    container = docker_engine.containers.run(
        orchestrator_image,
        detach=True,
        environment=environment,
        volumes={sock: {"bind": sock, "mode": "rw"}, volume.name: {"bind": "/data", "mode": "rw"}},
        group_add=[str(Path(sock).stat().st_gid)],
        ports={"8080/tcp": ("127.0.0.1", port)},
        labels={TEST_RUN_LABEL: TEST_RUN_ID},
    )
    try:
        health = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.5)
        assert health is not None and health.json() == {"status": "ok"}, container.logs()[-2000:]
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
        check = docker_engine.images.get(orchestrator_image).attrs["Config"]["Healthcheck"]["Test"]
        checked = container.exec_run(check[1:])  # the image's own HEALTHCHECK, as Docker runs it
        probe = "from orchestrator.sandbox.images import default_images_dir as d; print((d() / 'claude' / 'Dockerfile').is_file())"
        found = container.exec_run(["/opt/cage/bin/python", "-c", probe])
        assert found.output.decode().strip() == "True", (
            found.output
        )  # the image contexts, through the symlink
        runners = httpx.get(
            f"http://127.0.0.1:{port}/v1/admin/runners",
            headers={"Authorization": "Bearer boot-key-for-the-image-test"},
            timeout=10,
        )
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5)
        # exit codes, not output: `ls /data` once printed nothing in a full run while the database
        # answered, and the same run passed again
        on_volume = container.exec_run(["test", "-f", "/data/cage.db"]).exit_code
        as_user = container.exec_run(["sh", "-c", 'test "$(id -u)" = 10001']).exit_code
        logs = container.logs().decode()
    finally:
        container.remove(force=True)
        volume.remove(force=True)
    readiness = ready.json()
    assert re.fullmatch(r"[0-9a-f]{32}", readiness.pop("replica_id")), readiness  # this process's id
    assert readiness == {"status": "ok", "database": "ok", "engine": "ok", "leader": True}  # alone: it leads
    assert check[0] == "CMD" and "/readyz" in check[-1], check
    assert checked.exit_code == 0, checked.output  # python3 is there and the ready server passes it
    assert runners.status_code == 200 and {r["name"] for r in runners.json()} >= {"claude", "tai"}
    assert models.status_code == 401
    assert on_volume == 0  # the database lives on the data volume
    assert as_user == 0  # the server runs as uid 10001, not root
    assert '"event": "server ready"' in logs and "boot-key-for-the-image-test" not in logs
