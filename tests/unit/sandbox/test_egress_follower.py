"""The egress log follower's ends, against an engine API that answers each call as scripted: a
proxy that is gone (404) or being removed (409) ends it at once; any other refusal is retried."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import docker.errors
import requests

from orchestrator.sandbox.docker.egress import DockerEgress
from orchestrator.settings import Settings


def refusal(status: int, text: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError(text, response=response, explanation=text)


class ScriptedLogs:
    """`logs` raises the next scripted refusal; counts the calls."""

    def __init__(self, *refusals: docker.errors.APIError) -> None:
        self.refusals = list(refusals)
        self.calls = 0

    def logs(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        raise self.refusals.pop(0)


def follow(api: ScriptedLogs, tmp_path: Path) -> bool:
    """Run the follower with one sandbox tracked; whether it ended within 10 s."""
    egress = DockerEgress(lambda: api, Settings(data_dir=tmp_path / "cage"))
    egress.denials.track("cage-box", "10.254.0.0/28", "allow")
    follower = threading.Thread(target=egress._follow, daemon=True)
    follower.start()
    follower.join(timeout=10)
    return not follower.is_alive()


def test_a_proxy_marked_for_removal_ends_the_follower_at_once(tmp_path: Path) -> None:
    api = ScriptedLogs(refusal(409, "container is dead or marked for removal"))
    assert follow(api, tmp_path)
    assert api.calls == 1


def test_a_proxy_removed_ends_the_follower_at_once(tmp_path: Path) -> None:
    api = ScriptedLogs(refusal(404, "No such container: cage-egress"))
    assert follow(api, tmp_path)
    assert api.calls == 1


def test_another_refusal_is_retried_while_a_sandbox_is_tracked(tmp_path: Path) -> None:
    api = ScriptedLogs(refusal(500, "engine busy"), refusal(404, "No such container: cage-egress"))
    assert follow(api, tmp_path)
    assert api.calls == 2
