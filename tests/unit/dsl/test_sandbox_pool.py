"""The `pool` key of sandbox.yao: accepted for oneshot assistants, refused with file, line and key
path otherwise, and left out of the config hash (a new size must not recreate boxes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.dsl import parse_jsonc
from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.dsl.sandboxfile import load_sandbox
from orchestrator.errors import ConfigError
from orchestrator.sandbox.hashing import config_hash
from tests.subprocess_env import subprocess_env

FILE = "assistants/a/sandbox.yao"
ROOT = Path(__file__).resolve().parents[3]


def _load(text: str) -> SandboxSpec:
    return load_sandbox(parse_jsonc(text, file=FILE), environ={}, default_runner=None)


def test_pool_size_is_read_for_a_oneshot_box() -> None:
    spec = _load('{"version": "2.0", "runner": {"name": "tai"}, "pool": {"size": 3}}')
    assert spec.pool is not None and spec.pool.size == 3


@pytest.mark.parametrize(
    ("pool", "key_path"),
    [
        ('{"size": -1}', "pool.size"),
        ('{"size": 17}', "pool.size"),
        ('{"size": "two"}', "pool.size"),
        ('{"size": 1, "warm": true}', "pool.warm"),
        ("{}", "pool.size"),
        ("3", "pool"),
    ],
)
def test_bad_pool_keys_name_file_line_and_key_path(pool: str, key_path: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(f'{{"version": "2.0", "runner": {{"name": "tai"}},\n "pool": {pool}}}')
    assert info.value.key_path == key_path
    assert info.value.line == 2
    assert FILE in str(info.value)


def test_a_pool_on_a_kept_box_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        _load('{"version": "2.0", "runner": {"name": "tai"}, "lifecycle": "session",\n "pool": {"size": 2}}')
    assert info.value.key_path == "pool"
    assert info.value.line == 2
    assert "only lifecycle oneshot" in str(info.value)
    spec = _load('{"version": "2.0", "runner": {"name": "tai"}, "lifecycle": "session", "pool": {"size": 0}}')
    assert spec.pool is not None and spec.pool.size == 0


def test_the_pool_size_is_not_part_of_the_config_hash() -> None:
    plain = _load('{"version": "2.0", "runner": {"name": "tai"}}')
    pooled = _load('{"version": "2.0", "runner": {"name": "tai"}, "pool": {"size": 4}}')
    assert config_hash(plain, image_hash="x") == config_hash(pooled, image_hash="x")


def test_cage_validate_names_a_bad_pool_with_file_line_and_key_path(tmp_path: Path) -> None:
    app = tmp_path / "app"
    box = app / "assistants" / "t" / "p"
    box.mkdir(parents=True)
    (box / "package.yao").write_text(json.dumps({"name": "p"}))
    (box / "sandbox.yao").write_text(
        '{\n "version": "2.0",\n "runner": {"name": "claude"},\n "lifecycle": "session",\n "pool": {"size": 2}\n}\n'
    )
    refused = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "--app", str(app), "validate"],
        cwd=ROOT,
        env=subprocess_env(strip=("CAGE_", "_CAGE")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2, refused.stdout
    assert "assistants/t/p/sandbox.yao:5: pool: a pool serves only lifecycle oneshot" in refused.stderr
