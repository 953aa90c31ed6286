"""Every key of `sandbox.yao`, in every form Yao accepts, through the JSONC + validation path."""

from __future__ import annotations

from datetime import timedelta

import pytest

from orchestrator.dsl import (
    CopyStep,
    ExecStep,
    FileStep,
    Lifecycle,
    NetworkAllowlist,
    SandboxSpec,
    parse_jsonc,
)
from orchestrator.dsl.sandbox import ComputerSpec
from orchestrator.dsl.sandboxfile import load_sandbox
from orchestrator.errors import ConfigError

FULL = """{
  "version": "2.0",
  "computer": {
    "image": "cage/claude:abc", "memory": "2GB", "cpus": 1.5,
    "ports": [{"port": 3000, "host_port": 13000, "protocol": "tcp", "label": "web"}],
    "user": "sandbox", "work_dir": "/work", "mount_path": "/work", "mount_mode": "ro",
    "vnc": {"enabled": true, "view_only": true, "password": "$ENV.VNC_PW", "resolution": "1280x720"},
    "pids": 128, "network": "none", "runtime": "runsc",
    "read_only": true,
  },
  "runner": {
    "name": "claude/cli", "mode": "service", "options": {"max_turns": 3},
    "connectors": {"default": "anthropic", "heavy": {"connector": "openai", "override": "user"}},
    "supports": ["claude", "yao"],
  },
  "lifecycle": "longrunning", "idle_timeout": "1h30m", "max_lifetime": "24h", "stop_timeout": "500ms",
  "prepare": [
    {"action": "file", "path": "~/a.txt", "content": "hi", "mode": 420, "once": true},
    {"action": "copy", "src": "assets/x", "dst": "x", "ignore_error": true},
    {"action": "exec", "cmd": "make", "background": true, "timeout": "30s"},
  ],
  "environment": {"TOKEN": "$ENV.SB_TOKEN", "PLAIN": "v"},
  "secrets": {"GH": "$ENV.GH_TOKEN", "NPM": {"value": "literal-npm-token", "label": "npm", "required": true,
              "description": "d", "multiline": false, "env": "NPM_TOKEN"}},
  "filter": {"kind": "box", "image": "i", "vnc": false, "os": "linux", "arch": "amd64", "min_cpus": 1,
             "min_mem": "512m", "labels": {"zone": "a"}},
  "turn_timeout": "30m", "stall_timeout": "2m",
}"""

ENV = {"VNC_PW": "vnc-secret-1", "SB_TOKEN": "sb-token-123", "GH_TOKEN": "gh-token-456"}


def _load(text: str, environ: dict[str, str] | None = None, runner: str | None = None) -> SandboxSpec:
    doc = parse_jsonc(text, file="assistants/a/sandbox.yao")
    return load_sandbox(doc, environ=environ or {}, default_runner=runner)


def test_every_key_is_parsed() -> None:
    spec = _load(FULL, ENV)
    c = spec.computer
    assert (c.image, c.memory, c.cpus, c.user, c.work_dir, c.mount_path, c.mount_mode) == (
        "cage/claude:abc",
        2 * 2**30,
        1.5,
        "sandbox",
        "/work",
        "/work",
        "ro",
    )
    assert c.ports[0].model_dump() == {"port": 3000, "host_port": 13000, "protocol": "tcp", "label": "web"}
    assert (
        c.vnc.enabled
        and c.vnc.view_only
        and c.vnc.password == "vnc-secret-1"
        and c.vnc.resolution == "1280x720"
    )
    assert (c.pids, c.runtime, c.read_only) == (128, "runsc", True)
    assert c.network == "none"
    listed = ComputerSpec.model_validate({"network": {"allow": ["api.example.com", "10.0.0.0/8"]}})
    assert isinstance(listed.network, NetworkAllowlist) and listed.network.allow == (
        "api.example.com",
        "10.0.0.0/8",
    )
    r = spec.runner
    assert (r.name, r.mode, r.options, r.supports) == (
        "claude",
        "service",
        {"max_turns": 3},
        ("claude", "yaocode"),
    )
    assert r.connectors["default"].connector == "anthropic" and r.connectors["default"].override == "force"
    assert r.connectors["heavy"].connector == "openai" and r.connectors["heavy"].override == "user"
    assert spec.lifecycle is Lifecycle.LONGRUNNING
    assert spec.idle_timeout == timedelta(hours=1, minutes=30)
    assert spec.max_lifetime == timedelta(hours=24)
    assert spec.stop_timeout == timedelta(milliseconds=500)
    file_step, copy_step, exec_step = spec.prepare
    assert isinstance(file_step, FileStep) and file_step.once and file_step.mode == 0o644
    assert isinstance(copy_step, CopyStep) and copy_step.ignore_error and copy_step.dst == "x"
    assert (
        isinstance(exec_step, ExecStep)
        and exec_step.background
        and exec_step.timeout == timedelta(seconds=30)
    )
    assert spec.environment == {"TOKEN": "sb-token-123", "PLAIN": "v"}
    assert spec.secrets["GH"].value == "gh-token-456"
    assert spec.secrets["NPM"].env == "NPM_TOKEN" and spec.secrets["NPM"].required
    f = spec.filter
    assert f is not None and f.kind == ("box",) and f.min_mem == 512 * 2**20 and f.labels == {"zone": "a"}
    assert (spec.turn_timeout, spec.stall_timeout) == (timedelta(minutes=30), timedelta(minutes=2))


@pytest.mark.parametrize(
    ("vnc", "enabled"), [("true", True), ("false", False), ('{"enabled": true}', True), ("{}", False)]
)
def test_vnc_bool_or_object(vnc: str, enabled: bool) -> None:
    spec = _load(f'{{"version": "2.0", "runner": {{"name": "tai"}}, "computer": {{"vnc": {vnc}}}}}')
    assert spec.computer.vnc.enabled is enabled


def test_ports_as_ints_and_objects() -> None:
    ints = _load('{"version": "2.0", "runner": {"name": "tai"}, "computer": {"ports": [3000, 8080]}}')
    assert [p.port for p in ints.computer.ports] == [3000, 8080]
    objs = _load(
        '{"version": "2.0", "runner": {"name": "tai"},'
        ' "computer": {"ports": [{"port": 1, "protocol": "udp"}]}}'
    )
    assert objs.computer.ports[0].protocol == "udp"


@pytest.mark.parametrize(
    ("memory", "size"),
    [
        ('"2GB"', 2 * 2**30),
        ('"512m"', 512 * 2**20),
        ('"1024K"', 2**20),
        ('"1.5G"', int(1.5 * 2**30)),
        ("1048576", 1048576),
        ('"1T"', 2**40),
    ],
)
def test_memory_forms(memory: str, size: int) -> None:
    spec = _load(f'{{"version": "2.0", "runner": {{"name": "tai"}}, "computer": {{"memory": {memory}}}}}')
    assert spec.computer.memory == size


@pytest.mark.parametrize(
    ("value", "delta"),
    [
        ('"30m"', timedelta(minutes=30)),
        ('"1h30m"', timedelta(minutes=90)),
        ('"500ms"', timedelta(milliseconds=500)),
        ("45", timedelta(seconds=45)),
    ],
)
def test_duration_forms(value: str, delta: timedelta) -> None:
    spec = _load(f'{{"version": "2.0", "runner": {{"name": "tai"}}, "idle_timeout": {value}}}')
    assert spec.idle_timeout == delta


def test_filter_kind_list_and_secret_string() -> None:
    spec = _load(
        '{"version": "2.0", "runner": {"name": "tai"}, "filter": {"kind": ["box", "host"]},'
        ' "secrets": {"A": "plain-value"}}'
    )
    assert spec.filter is not None and spec.filter.kind == ("box", "host")
    assert spec.secrets["A"].value == "plain-value"


def test_empty_lifecycle_is_oneshot_and_default_runner_fills_in() -> None:
    spec = _load('{"version": "2.0", "lifecycle": ""}', runner="codex")
    assert spec.lifecycle is Lifecycle.ONESHOT
    assert spec.runner.name == "codex"
    own = _load('{"version": "2.0", "runner": {"name": "opencode"}}', runner="codex")
    assert own.runner.name == "opencode"


@pytest.mark.parametrize("version", ['"1.0"', '"2"', "2.0"])
def test_version_must_be_2_0(version: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(f'{{\n "version": {version},\n "runner": {{"name": "tai"}}}}')
    assert info.value.key_path == "version"
    assert info.value.line == 2


def test_missing_env_variable_names_key_and_variable_not_value() -> None:
    with pytest.raises(ConfigError) as info:
        _load('{"version": "2.0", "runner": {"name": "tai"},\n "environment": {"A": "$ENV.NOPE_NOT_SET"}}')
    assert str(info.value) == (
        "assistants/a/sandbox.yao:2: environment.A: environment variable NOPE_NOT_SET is not set"
    )
