"""Image hash and config hash: stable for equal inputs, different for any changed input, no secrets."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.sandbox.hashing import (
    canonical_config,
    config_hash,
    image_hash,
    image_tag,
    secret_digest,
    sha256_hex,
)

HEX64 = re.compile(r"^[0-9a-f]{64}$")
BASE_ID = "sha256:" + "a" * 64


@pytest.fixture
def context(tmp_path: Path) -> Path:
    (tmp_path / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY files/ /opt/\n")
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "a.txt").write_text("alpha\n")
    (tmp_path / "files" / "b.txt").write_text("beta\n")
    return tmp_path


def _ihash(ctx: Path, **overrides: Any) -> str:
    kwargs: dict[str, Any] = {"base_image_id": BASE_ID, "build_args": {"CLI_VERSION": "1.0"}}
    kwargs.update(overrides)
    return image_hash(ctx, **kwargs)


def test_image_hash_is_stable_hex_and_names_the_tag(context: Path) -> None:
    first = _ihash(context)
    assert HEX64.match(first)
    assert _ihash(context) == first
    assert image_tag("claude", first) == f"cage/claude:{first[:12]}"


def test_image_hash_does_not_depend_on_build_arg_order(context: Path) -> None:
    one = _ihash(context, build_args={"A": "1", "B": "2"})
    other = _ihash(context, build_args={"B": "2", "A": "1"})
    assert one == other


def test_image_hash_changes_with_the_dockerfile(context: Path) -> None:
    before = _ihash(context)
    (context / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY files/ /srv/\n")
    assert _ihash(context) != before


def test_image_hash_changes_with_a_context_file(context: Path) -> None:
    before = _ihash(context)
    (context / "files" / "b.txt").write_text("beta2\n")
    assert _ihash(context) != before


def test_image_hash_changes_when_a_file_is_added_or_renamed(context: Path) -> None:
    before = _ihash(context)
    (context / "files" / "b.txt").rename(context / "files" / "c.txt")
    renamed = _ihash(context)
    assert renamed != before
    (context / "files" / "d.txt").write_text("")
    assert _ihash(context) not in (before, renamed)


def test_image_hash_changes_with_the_base_image_id(context: Path) -> None:
    assert _ihash(context) != _ihash(context, base_image_id="sha256:" + "b" * 64)


def test_image_hash_changes_with_a_build_arg(context: Path) -> None:
    assert _ihash(context) != _ihash(context, build_args={"CLI_VERSION": "1.1"})
    assert _ihash(context) != _ihash(context, build_args={"CLI_VERSION": "1.0", "X": ""})


def test_image_hash_changes_with_extra_files(context: Path) -> None:
    plain = _ihash(context)
    with_ca = _ihash(context, extra_files={"extra-ca.pem": b"-----BEGIN CERTIFICATE-----\n"})
    other_ca = _ihash(context, extra_files={"extra-ca.pem": b"-----BEGIN CERTIFICATE-----\nX\n"})
    assert len({plain, with_ca, other_ca}) == 3


def test_extra_file_overrides_the_context_file_of_the_same_name(context: Path) -> None:
    same = _ihash(context, extra_files={"files/a.txt": b"alpha\n"})
    changed = _ihash(context, extra_files={"files/a.txt": b"other\n"})
    assert same == _ihash(context)
    assert changed != same


# --- config hash --------------------------------------------------------------------------------

SECRET = "sk-very-secret-value-1234567890"


def _spec(**overrides: Any) -> SandboxSpec:
    data: dict[str, Any] = {
        "version": "2.0",
        "runner": {"name": "claude", "options": {"max_turns": 5}},
        "computer": {"memory": "2GB", "cpus": 1.5},
        "lifecycle": "session",
        "environment": {"MODE": "dev"},
        "secrets": {"GITHUB_TOKEN": {"value": SECRET, "env": "GITHUB_TOKEN"}},
        "prepare": [{"action": "exec", "cmd": "echo hi", "once": True}],
    }
    data.update(overrides)
    return SandboxSpec.model_validate(data)


IMAGE_HASH = "c" * 64


def test_config_hash_is_stable_and_hex() -> None:
    first = config_hash(_spec(), image_hash=IMAGE_HASH)
    assert HEX64.match(first)
    assert config_hash(_spec(), image_hash=IMAGE_HASH) == first


@pytest.mark.parametrize(
    "change",
    [
        {"runner": {"name": "codex", "options": {"max_turns": 5}}},
        {"runner": {"name": "claude", "options": {"max_turns": 6}}},
        {"computer": {"memory": "3GB", "cpus": 1.5}},
        {"computer": {"memory": "2GB", "cpus": 2}},
        {"computer": {"memory": "2GB", "cpus": 1.5, "network": "none"}},
        {"computer": {"memory": "2GB", "cpus": 1.5, "image": "my/base:1"}},
        {"lifecycle": "longrunning"},
        {"idle_timeout": "45m"},
        {"environment": {"MODE": "prod"}},
        {"environment": {"MODE": "dev", "EXTRA": "1"}},
        {"prepare": [{"action": "exec", "cmd": "echo hello", "once": True}]},
        {"prepare": []},
        {"secrets": {"GITHUB_TOKEN": {"value": SECRET, "env": "GH"}}},
        {"secrets": {"OTHER": {"value": SECRET, "env": "GITHUB_TOKEN"}}},
        {"turn_timeout": "10m"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_config_hash_changes_with_any_spec_field(change: dict[str, Any]) -> None:
    assert config_hash(_spec(**change), image_hash=IMAGE_HASH) != config_hash(_spec(), image_hash=IMAGE_HASH)


def test_config_hash_ignores_explicit_defaults() -> None:
    implicit = _spec()
    explicit = _spec(stop_timeout="2s", computer={"memory": "2GB", "cpus": 1.5, "work_dir": "/workspace"})
    assert config_hash(explicit, image_hash=IMAGE_HASH) == config_hash(implicit, image_hash=IMAGE_HASH)


def test_config_hash_changes_with_the_image_hash() -> None:
    assert config_hash(_spec(), image_hash="d" * 64) != config_hash(_spec(), image_hash=IMAGE_HASH)


def test_config_hash_changes_with_mcp_servers_but_not_their_order() -> None:
    one = {"name": "files", "command": "mcp-files", "args": ["--root", "/workspace"]}
    two = {"name": "web", "url": "http://mcp:8000/sse", "headers": {"Authorization": "Bearer abcdefgh"}}
    base = config_hash(_spec(), image_hash=IMAGE_HASH)
    with_one = config_hash(_spec(), image_hash=IMAGE_HASH, mcp_servers=[one])
    both = config_hash(_spec(), image_hash=IMAGE_HASH, mcp_servers=[one, two])
    assert len({base, with_one, both}) == 3
    assert config_hash(_spec(), image_hash=IMAGE_HASH, mcp_servers=[two, one]) == both
    changed = {**one, "args": ["--root", "/tmp"]}
    assert config_hash(_spec(), image_hash=IMAGE_HASH, mcp_servers=[changed]) != with_one


def test_config_hash_changes_with_skills() -> None:
    base = config_hash(_spec(), image_hash=IMAGE_HASH)
    skill = config_hash(_spec(), image_hash=IMAGE_HASH, skills={"review": sha256_hex("v1")})
    edited = config_hash(_spec(), image_hash=IMAGE_HASH, skills={"review": sha256_hex("v2")})
    renamed = config_hash(_spec(), image_hash=IMAGE_HASH, skills={"audit": sha256_hex("v1")})
    assert len({base, skill, edited, renamed}) == 4


def test_secret_value_never_appears_in_the_canonical_text() -> None:
    spec = _spec(
        environment={"API_KEY": "env-secret-value-xyz"},
        computer={"vnc": {"enabled": True, "password": "vnc-password-123"}},
    )
    mcp = [{"name": "gh", "command": "gh-mcp", "env": {"GH_TOKEN": "mcp-token-value-456"}}]
    text = canonical_config(spec, image_hash=IMAGE_HASH, mcp_servers=mcp)
    for secret in (SECRET, "env-secret-value-xyz", "vnc-password-123", "mcp-token-value-456"):
        assert secret not in text
    assert secret_digest(SECRET) in text
    assert config_hash(spec, image_hash=IMAGE_HASH, mcp_servers=mcp) == sha256_hex(text)


def test_changing_a_secret_value_changes_the_hash() -> None:
    other = _spec(secrets={"GITHUB_TOKEN": {"value": SECRET + "x", "env": "GITHUB_TOKEN"}})
    assert config_hash(other, image_hash=IMAGE_HASH) != config_hash(_spec(), image_hash=IMAGE_HASH)
    assert SECRET not in canonical_config(other, image_hash=IMAGE_HASH)
