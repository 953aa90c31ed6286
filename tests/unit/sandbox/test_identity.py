"""Identity names by lifecycle, id validation and Docker name sanitising."""

from __future__ import annotations

import re

import pytest

from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.errors import WorkspaceError
from orchestrator.sandbox.identity import container_name, identity_for, validate_id
from orchestrator.sandbox.locks import KeyedLocks
from orchestrator.sandbox.workspace import volume_name

DOCKER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")


def test_names_by_lifecycle() -> None:
    kw = {"owner": "team1", "assistant_id": "tests.echo", "chat_id": "chat9", "workspace_id": "ws2"}
    assert identity_for(Lifecycle.SESSION, **kw).name == "team1-tests.echo-chat9"
    assert identity_for(Lifecycle.LONGRUNNING, **kw).name == "team1-tests.echo.ws2"
    assert identity_for(Lifecycle.PERSISTENT, **kw).name == "team1-tests.echo.ws2"
    one, two = identity_for(Lifecycle.ONESHOT, **kw), identity_for(Lifecycle.ONESHOT, **kw)
    assert one.name != two.name and re.fullmatch(r"cage-[0-9a-f]{16}", one.name)


@pytest.mark.parametrize("bad", ["", "a/b", "..", ".", "a b", "x" * 65, "a;rm", "é"])
def test_invalid_ids(bad: str) -> None:
    with pytest.raises(WorkspaceError):
        validate_id("chat", bad)


@pytest.mark.parametrize("raw", ["_lead", "-x", "a" * 300, "ok.name-1"])
def test_container_names_fit_docker(raw: str) -> None:
    name = container_name(raw)
    assert DOCKER_NAME.fullmatch(name) and len(name) <= 120
    assert container_name(raw) == name


def test_sanitised_names_stay_distinct() -> None:
    assert container_name("a" * 300) != container_name("a" * 299 + "b")
    assert volume_name("o", "w") == "cage-ws-o-w"


async def test_keyed_locks_are_dropped_when_free() -> None:
    locks = KeyedLocks()
    async with locks.hold("k"):
        assert len(locks) == 1
    assert len(locks) == 0
