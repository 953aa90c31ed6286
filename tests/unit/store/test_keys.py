"""API keys: shown once, stored as a hash, verified in constant time, revocable; never logged."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from orchestrator.errors import UsageError
from orchestrator.store import RecordNotFound, Store
from tests.unit.store.conftest import FakeClock


async def test_the_right_key_verifies_with_its_info(store: Store, clock: FakeClock) -> None:
    key_id, plaintext = await store.keys.create_key("ci runner", "user", "alice")
    assert plaintext.startswith("cage_") and len(plaintext) > 50
    info = await store.keys.verify(plaintext)
    assert info is not None
    assert (info.id, info.name, info.role, info.owner, info.revoked) == (
        key_id,
        "ci runner",
        "user",
        "alice",
        False,
    )
    assert plaintext.split("_")[1] == info.prefix
    assert info.last_used_at == clock.now
    assert "hash" not in info.model_dump() and plaintext not in repr(info)


async def test_wrong_keys_do_not_verify(store: Store) -> None:
    _, plaintext = await store.keys.create_key("k", "admin", "root")
    tampered = plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")
    prefix = plaintext.split("_")[1]
    unknown_prefix = plaintext.replace(prefix, "0" * 12 if prefix != "0" * 12 else "1" * 12)
    for wrong in (tampered, unknown_prefix, "", "cage_", "Bearer " + plaintext, plaintext + "x", "x" * 80):
        assert await store.keys.verify(wrong) is None, wrong


async def test_a_revoked_key_no_longer_verifies(store: Store) -> None:
    key_id, plaintext = await store.keys.create_key("k", "user", "alice")
    other_id, other = await store.keys.create_key("k2", "user", "alice")
    revoked = await store.keys.revoke(key_id)
    assert revoked.revoked
    assert await store.keys.verify(plaintext) is None
    assert (await store.keys.revoke(key_id)).revoked  # twice is harmless
    verified = await store.keys.verify(other)
    assert verified is not None and verified.id == other_id
    assert [k.id for k in await store.keys.list(owner="alice")] == [other_id]
    assert {k.id for k in await store.keys.list(owner="alice", include_revoked=True)} == {key_id, other_id}
    with pytest.raises(RecordNotFound):
        await store.keys.revoke("key_missing")


async def test_last_used_is_updated_at_most_once_a_minute(store: Store, clock: FakeClock) -> None:
    key_id, plaintext = await store.keys.create_key("k", "user", "alice")
    first = clock.now
    await store.keys.verify(plaintext)
    clock.advance(30)
    await store.keys.verify(plaintext)
    stored = await store.keys.get(key_id)
    assert stored is not None and stored.last_used_at == first
    clock.advance(31)
    await store.keys.verify(plaintext)
    stored = await store.keys.get(key_id)
    assert stored is not None and stored.last_used_at == clock.now


async def test_plaintext_is_neither_stored_nor_logged(
    store: Store, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    logging.getLogger("sqlalchemy.engine").setLevel(logging.INFO)  # log every statement and parameter
    try:
        _, plaintext = await store.keys.create_key("k", "admin", "root")
        await store.keys.verify(plaintext)
    finally:
        logging.getLogger("sqlalchemy.engine").setLevel(logging.WARNING)
    secret_part = plaintext.split("_", 2)[2]
    assert plaintext.split("_")[1] in caplog.text, "the engine log should show the statements' parameters"
    assert secret_part not in caplog.text

    engine = create_async_engine(database_url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT * FROM api_keys"))).all()
    finally:
        await engine.dispose()
    dumped = repr(rows)
    assert len(rows) == 1 and secret_part not in dumped and plaintext not in dumped


async def test_unknown_role_is_refused(store: Store) -> None:
    with pytest.raises(UsageError, match="role"):
        await store.keys.create_key("k", "root", "x")  # type: ignore[arg-type]
    assert await store.keys.list(include_revoked=True) == []
