"""Session ids per owner: the client's id is unique among its owner's sessions only; the internal id is a
digest of owner and client id, injective across owners."""

from __future__ import annotations

import pytest

from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.sandbox.identity import identity_for
from orchestrator.store import RecordExists, Store
from orchestrator.store.sessions import internal_session_id


def test_the_internal_id_is_a_digest_of_owner_and_client_id() -> None:
    ids = {
        internal_session_id("alice", "x"),
        internal_session_id("bob", "x"),
        internal_session_id("alice", "y"),
        internal_session_id("ab", "c"),
        internal_session_id("a", "bc"),  # the separator keeps the owner/id boundary
    }
    assert len(ids) == 5
    assert internal_session_id("alice", "x") == internal_session_id("alice", "x")
    one = internal_session_id("alice", "x")
    assert one.startswith("c") and len(one) == 41 and all(ch in "0123456789abcdef" for ch in one[1:])
    assert internal_session_id("alice", "x" * 64) != "x" * 64  # never the client's id itself


def test_sandbox_names_of_the_same_client_id_differ_across_owners() -> None:
    names = {
        identity_for(
            Lifecycle.SESSION,
            owner=owner,
            assistant_id="tests.box",
            session_id=internal_session_id(owner, "shared"),
            workspace_id=None,
        ).name
        for owner in ("alice", "bob")
    }
    assert len(names) == 2


async def test_two_owners_may_use_the_same_client_id(store: Store) -> None:
    alice = await store.sessions.create("alice", "tests.echo", client_id="shared", title="a")
    bob = await store.sessions.create("bob", "tests.echo", client_id="shared", title="b")
    assert alice.id != bob.id and alice.client_id == bob.client_id == "shared"
    assert alice.id == internal_session_id("alice", "shared")
    assert await store.sessions.find("alice", "shared") == alice
    assert await store.sessions.find("bob", "shared") == bob
    assert await store.sessions.find("carol", "shared") is None
    assert await store.sessions.find("alice", alice.id) is None  # the internal id is not a client id

    with pytest.raises(RecordExists):
        await store.sessions.create("alice", "tests.echo", client_id="shared")

    assert await store.sessions.delete(bob.id)
    assert await store.sessions.find("bob", "shared") is None
    assert await store.sessions.find("alice", "shared") == alice


async def test_a_server_chosen_id_is_random_and_is_its_own_client_id(store: Store) -> None:
    one = await store.sessions.create("alice", "tests.echo")
    two = await store.sessions.create("alice", "tests.echo")
    assert one.id != two.id and len(one.id) == 32
    assert one.client_id == one.id and await store.sessions.find("alice", one.id) == one


async def test_a_set_internal_id_is_also_the_client_id(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo", session_id="c1")
    assert (session.id, session.client_id) == ("c1", "c1")
    assert await store.sessions.find("alice", "c1") == session
