"""A TypeScript hook is hostile code on the host: it gets no environment, no file writes, no
child processes, no network, and no way out of its `vm` context. Checked on the host after."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import anyio
import pytest

from orchestrator.hooks_ts import TsRuntime, TsRuntimeError
from orchestrator.hooks_ts.runtime import _isolation_prefix, _node, node_argv
from tests.ts_runtime import ensure_ts_runtime


@pytest.fixture(autouse=True, scope="module")
def _runtime() -> None:
    ensure_ts_runtime()


PROBE = """
const fs = require("fs");
const out = {};
out.env = Object.keys(process.env);
try { fs.writeFileSync(process.argv[2], "pwned"); out.write = "ok"; } catch (e) { out.write = e.code; }
try { require("child_process").execSync("id"); out.spawn = "ok"; } catch (e) { out.spawn = e.code; }
try { fs.readFileSync("/etc/hostname"); out.read = "ok"; } catch (e) { out.read = e.code; }
const sock = require("net").connect(Number(process.argv[3]), process.argv[4]);
sock.on("connect", () => { out.net = "ok"; done(); });
sock.on("error", (e) => { out.net = e.code; done(); });
function done() { process.stdout.write(JSON.stringify(out)); process.exit(0); }
setTimeout(() => { out.net = "timeout"; done(); }, 3000);
"""


def _host_ip() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.255.255.255", 1))
        return str(s.getsockname()[0])


def test_the_node_process_has_no_env_writes_spawns_or_network(tmp_path: Path) -> None:
    import json

    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    script = probe_dir / "probe.js"
    script.write_text(PROBE)
    target = tmp_path / "written-by-hook"
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    node = _node()
    assert node is not None
    argv = [*node_argv(node, script, readable=probe_dir), str(target), str(port), _host_ip()]
    secret_env = {**os.environ, "CAGE_SECRET_CANARY": "sk-canary-0042"}
    done = subprocess.run(argv, capture_output=True, timeout=30, env={}, cwd=probe_dir, check=False)
    result = json.loads(done.stdout)
    assert "CAGE_SECRET_CANARY" not in secret_env or result["env"] == []
    assert result["write"] == "ERR_ACCESS_DENIED" and not target.exists()
    assert result["spawn"] == "ERR_ACCESS_DENIED"
    assert result["read"] == "ERR_ACCESS_DENIED"  # outside the readable folder
    if _isolation_prefix():
        assert result["net"] != "ok"
        with pytest.raises(TimeoutError):
            listener.accept()
    listener.close()


@pytest.mark.parametrize(
    "code",
    [
        'function Create() { return this.constructor.constructor("return process")().env; }',
        "function Create() { return eval('1 + 1'); }",
        'function Create() { return require("fs").readdirSync("/"); }',
        "function Create() { return process.env; }",
    ],
)
def test_a_hook_cannot_leave_its_context(code: str) -> None:
    async def run() -> object:
        outcome = await TsRuntime(timeout=20).run(
            code=code,
            filename="index.ts",
            function="Create",
            args=[],
            assistant_id="evil",
            ctx=None,
            handlers={},
        )
        return outcome.value

    with pytest.raises(TsRuntimeError):
        anyio.run(run)


@pytest.mark.serial  # `pgrep` on the whole host: another worker's hook host would be found
def test_a_hook_that_never_ends_is_killed() -> None:
    async def run() -> None:
        await TsRuntime(timeout=2).run(
            code="function Create() { for (;;) {} }",
            filename="index.ts",
            function="Create",
            args=[],
            assistant_id="spin",
            ctx=None,
            handlers={},
        )

    with pytest.raises(TsRuntimeError, match="did not finish within 2s"):
        anyio.run(run)
    left = subprocess.run(["pgrep", "-f", "hooks_ts/js/host.js"], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == ""
