"""compose.yaml runs the orchestrator the way the image expects (checked without Docker Compose,
which this build machine cannot install: see docs/api.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return loaded


def test_the_orchestrator_gets_the_socket_a_data_volume_and_a_loopback_port() -> None:
    doc = compose()
    cage = doc["services"]["cage"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in cage["volumes"]
    assert "cage-data:/data" in cage["volumes"] and "cage-data" in doc["volumes"]
    assert all(str(p).startswith("127.0.0.1:") for p in cage["ports"])
    assert str(cage["ports"][0]).endswith(":8080")
    assert cage["build"]["context"] == "." and "BASE_IMAGE" in cage["build"]["args"]
    assert "CAGE_SANDBOX_LABELS" in cage["environment"]  # reconcile touches only this deployment's boxes
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "EXPOSE 8080" in dockerfile and 'VOLUME ["/data"]' in dockerfile
    assert re.search(r"^ARG BASE_IMAGE=debian:bookworm-slim$", dockerfile, re.M)


def test_postgres_is_an_optional_profile_and_no_secret_is_written_in() -> None:
    doc = compose()
    assert doc["services"]["postgres"]["profiles"] == ["postgres"]
    assert "profiles" not in doc["services"]["cage"]
    text = (ROOT / "compose.yaml").read_text()
    for line in text.splitlines():
        if re.search(r"(KEY|PASSWORD|TOKEN)\s*:", line):
            assert "${" in line, line  # secrets come from the environment
