"""Identity names by lifecycle, workspace scopes, id validation, and injectivity of every name."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.errors import WorkspaceError
from orchestrator.sandbox.identity import (
    MAX_NAME,
    SandboxIdentity,
    container_name,
    identity_for,
    identity_key,
    validate_id,
)
from orchestrator.sandbox.locks import KeyedLocks
from orchestrator.sandbox.workspace import WorkspaceScope, legacy_volume_name, volume_name, workspace_scope

DOCKER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
IDS = st.text(alphabet="ab-._1", min_size=1, max_size=8).filter(lambda v: v not in (".", ".."))
LONG_LIVED = (Lifecycle.SESSION, Lifecycle.LONGRUNNING, Lifecycle.PERSISTENT)


def _ident(
    lifecycle: Lifecycle, owner: str, assistant: str, session: str, workspace: str | None
) -> SandboxIdentity:
    return identity_for(
        lifecycle, owner=owner, assistant_id=assistant, session_id=session, workspace_id=workspace
    )


def test_names_by_lifecycle() -> None:
    kw = {"owner": "team1", "assistant_id": "tests.echo", "session_id": "chat9", "workspace_id": "ws2"}
    session = identity_for(Lifecycle.SESSION, **kw)
    longrunning = identity_for(Lifecycle.LONGRUNNING, **kw)
    assert re.fullmatch(r"cage-team1-tests\.echo-[0-9a-f]{24}", session.name)
    assert longrunning.name == identity_for(Lifecycle.PERSISTENT, **kw).name != session.name
    assert identity_for(Lifecycle.SESSION, **{**kw, "session_id": "chat8"}).name != session.name
    one, two = identity_for(Lifecycle.ONESHOT, **kw), identity_for(Lifecycle.ONESHOT, **kw)
    assert one.name != two.name and re.fullmatch(r"cage-[0-9a-f]{16}", one.name)


def test_the_audit_collision_is_gone() -> None:
    """H5: `acme` + `ci-default` used to be `acme-ci` + `default` (`cage-ws-acme-ci-default`)."""
    acme = _ident(Lifecycle.LONGRUNNING, "acme", "a.b", "c", "ci-default")
    acme_ci = _ident(Lifecycle.LONGRUNNING, "acme-ci", "a.b", "c", "default")
    assert volume_name(acme) != volume_name(acme_ci)
    assert acme.name != acme_ci.name
    assert volume_name(acme) != volume_name(_ident(Lifecycle.LONGRUNNING, "acme-ci", "a.b", "c", None))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(LONG_LIVED), IDS, IDS, IDS, st.one_of(st.none(), IDS)),
        min_size=2,
        max_size=12,
        unique=True,
    )
)
def test_distinct_identities_never_share_a_name(
    rows: list[tuple[Lifecycle, str, str, str, str | None]],
) -> None:
    """Sandbox names and workspace volume names are injective in the whole identity.

    The alphabet is tiny and full of separators (`-`, `.`, `_`) so that concatenation
    ambiguities like the audit's show up in a few hundred examples.
    """
    names: dict[str, tuple[object, ...]] = {}
    volumes: dict[str, tuple[object, ...]] = {}
    for lifecycle, owner, assistant, session, workspace in rows:
        ident = _ident(lifecycle, owner, assistant, session, workspace)
        assert DOCKER_NAME.fullmatch(ident.name) and len(ident.name) <= MAX_NAME
        is_session = lifecycle is Lifecycle.SESSION
        box_key = (is_session, owner, assistant, session if is_session else None, workspace)
        assert names.setdefault(ident.name, box_key) == box_key
        scope = workspace_scope(ident)
        volume_key = (scope.owner, scope.workspace_id, scope.assistant_id, scope.session_id)
        assert volumes.setdefault(scope.volume_name, volume_key) == volume_key


@given(st.lists(IDS, min_size=1, max_size=4), st.lists(IDS, min_size=1, max_size=4))
def test_identity_key_is_injective(left: list[str], right: list[str]) -> None:
    assert (identity_key("k", *left) == identity_key("k", *right)) == (left == right)


def test_workspace_scopes() -> None:
    """Default: one owner and one assistant (one session for a `session` box); `workspace_id` shares by owner."""
    a = _ident(Lifecycle.LONGRUNNING, "o", "a.one", "c1", None)
    b = _ident(Lifecycle.LONGRUNNING, "o", "a.two", "c1", None)
    assert volume_name(a) != volume_name(b)
    s1 = _ident(Lifecycle.SESSION, "o", "a.one", "c1", None)
    s2 = _ident(Lifecycle.SESSION, "o", "a.one", "c2", None)
    assert volume_name(s1) != volume_name(s2) != volume_name(a)
    shared = [_ident(Lifecycle.SESSION, "o", x, c, "team") for x, c in (("a.one", "c1"), ("a.two", "c2"))]
    assert volume_name(shared[0]) == volume_name(shared[1])
    assert volume_name(_ident(Lifecycle.SESSION, "p", "a.one", "c1", "team")) != volume_name(shared[0])
    assert workspace_scope(shared[0]).labels() == {
        "cage.volume": "workspace",
        "cage.owner": "o",
        "cage.workspace": "team",
    }


def test_legacy_volume_is_attributed_only_when_unambiguous() -> None:
    assert (
        legacy_volume_name(WorkspaceScope(owner="local", workspace_id="default")) == "cage-ws-local-default"
    )
    assert legacy_volume_name(WorkspaceScope(owner="local", workspace_id="default", assistant_id="a")) == (
        "cage-ws-local-default"
    )
    assert legacy_volume_name(WorkspaceScope(owner="acme", workspace_id="ci-default")) is None
    assert legacy_volume_name(WorkspaceScope(owner="acme-ci", workspace_id="default")) is None
    session = WorkspaceScope(owner="local", workspace_id="default", assistant_id="a", session_id="c")
    assert legacy_volume_name(session) is None


@pytest.mark.parametrize("bad", ["", "a/b", "..", ".", "a b", "x" * 65, "a;rm", "é"])
def test_invalid_ids(bad: str) -> None:
    with pytest.raises(WorkspaceError):
        validate_id("session", bad)


@pytest.mark.parametrize("raw", ["_lead", "-x", "a" * 300, "ok.name-1"])
def test_container_names_fit_docker(raw: str) -> None:
    name = container_name(raw)
    assert DOCKER_NAME.fullmatch(name) and len(name) <= 120
    assert container_name(raw) == name


def test_long_ids_still_make_valid_names() -> None:
    ident = _ident(Lifecycle.SESSION, "o" * 64, "a" * 64, "c" * 64, "w" * 64)
    assert DOCKER_NAME.fullmatch(ident.name) and len(ident.name) <= MAX_NAME
    assert DOCKER_NAME.fullmatch(volume_name(ident)) and len(volume_name(ident)) <= MAX_NAME


async def test_keyed_locks_are_dropped_when_free() -> None:
    locks = KeyedLocks()
    async with locks.hold("k"):
        assert len(locks) == 1
    assert len(locks) == 0
