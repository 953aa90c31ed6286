"""Issue 12: a gateway token is worth nothing outside its own sandbox's turn.

On the real engine, through the real pipeline (one `PipelineService`, so one gateway lives across
both turns): the thief's agent reads its own token from its environment, uses it for its own
connector (200) and for the victim's connector (403), and leaves it in its checkout. Its oneshot
box is removed with the turn. The token is then handed to the victim's sandbox, whose agent tries
it against both connectors: 401, the token died with its turn and sandbox. Upstream only ever
saw the real keys.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import docker
import pytest

from orchestrator.pipeline import InputMessage, TurnInput, TurnOptions
from orchestrator.services import open_services
from orchestrator.settings import Settings
from tests.security.keys_rig import *  # noqa: F403 - the fixtures
from tests.security.keys_rig import HOST_CA, KeysApp

pytestmark = [pytest.mark.docker, pytest.mark.slow]
EXTRA_CA = Path(HOST_CA) if Path(HOST_CA).is_file() else None

PROBE = """\
import os, sys, urllib.error, urllib.request
root = os.environ["ANTHROPIC_BASE_URL"].split("/model/")[0]
token = open(sys.argv[2]).read().strip() if len(sys.argv) > 2 else os.environ["ANTHROPIC_API_KEY"]
body = b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}'
request = urllib.request.Request(f"{root}/model/{sys.argv[1]}/v1/messages", data=body, headers={
    "x-api-key": token, "content-type": "application/json", "anthropic-version": "2023-06-01"})
try:
    print(urllib.request.urlopen(request, timeout=20).status)
except urllib.error.HTTPError as exc:
    print(exc.code)
"""


def checkout(path: Path) -> Path:
    path.mkdir()
    (path / "probe.py").write_text(PROBE)
    for item in (path, path / "probe.py"):
        os.chown(item, 1000, 1000)
    return path


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


async def test_a_stolen_token_fails_for_another_connector_and_after_its_sandbox_is_gone(
    keys_app: KeysApp,
    tmp_path: Path,
    docker_engine: docker.DockerClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = keys_app.server
    victim_key = "vctm" + os.urandom(12).hex()
    monkeypatch.setenv("CANARY_MODEL_KEY", keys_app.key)
    monkeypatch.setenv("VICTIM_MODEL_KEY", victim_key)
    server.add_scenario(
        "thief",
        [
            {
                "shell": "python3 probe.py conn-thief > own.txt; python3 probe.py conn-victim > cross.txt; "
                'printf %s "$ANTHROPIC_API_KEY" > token.txt'
            },
            {"text": "done"},
        ],
    )
    server.add_scenario(
        "victim",
        [
            {
                "shell": "python3 probe.py conn-thief stolen.txt > stolen-own.txt; "
                "python3 probe.py conn-victim stolen.txt > stolen-cross.txt; python3 probe.py conn-victim > own.txt"
            },
            {"text": "done"},
        ],
    )
    thief = keys_app.assistant("claude", "thief", name="thief", lifecycle="oneshot")
    victim = keys_app.assistant(
        "claude", "victim", name="victim", lifecycle="oneshot", key_env="VICTIM_MODEL_KEY"
    )
    settings = Settings(
        app_dir=keys_app.root,
        data_dir=keys_app.data_dir,
        sandbox_labels=keys_app.labels,
        extra_ca_certs=EXTRA_CA,
    )
    async with open_services(settings) as services:
        await services.store.migrate()
        pipeline = services.turns
        before = len(server.requests.all())
        ws_thief, ws_victim = checkout(tmp_path / "thief"), checkout(tmp_path / "victim")
        first = await pipeline.start(
            TurnInput(
                assistant_id=thief,
                owner="mallory",
                session_id="c-thief",
                messages=(InputMessage(content="go"),),
                options=TurnOptions(host_workspace=ws_thief),
            )
        )
        assert (await first.result()).status == "completed"
        assert (ws_thief / "own.txt").read_text().strip() == "200"
        assert (ws_thief / "cross.txt").read_text().strip() == "403"  # not the victim's connector
        stolen = (ws_thief / "token.txt").read_text().strip()
        assert stolen.startswith("cage-gw-")
        labels = [f"{k}={v}" for k, v in keys_app.labels.items()] + [f"cage.assistant={thief}"]
        assert docker_engine.containers.list(all=True, filters={"label": labels}) == []  # the sandbox is gone
        assert len(services.gateway.registry) == 0

        (ws_victim / "stolen.txt").write_text(stolen)
        second = await pipeline.start(
            TurnInput(
                assistant_id=victim,
                owner="alice",
                session_id="c-victim",
                messages=(InputMessage(content="go"),),
                options=TurnOptions(host_workspace=ws_victim),
            )
        )
        assert (await second.result()).status == "completed"
        assert (ws_victim / "stolen-own.txt").read_text().strip() == "401"
        assert (ws_victim / "stolen-cross.txt").read_text().strip() == "401"
        assert (ws_victim / "own.txt").read_text().strip() == "200"  # the victim's own token works
        seen = {r.credential_sha256 for r in server.requests.all()[before:]}
        assert seen == {sha(keys_app.key), sha(victim_key)}  # upstream only ever saw the real keys
