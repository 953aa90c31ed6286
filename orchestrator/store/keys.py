"""API keys: created once with their plaintext shown to the caller, then known only by a hash.

A token reads `cage_<prefix>_<secret>`: `prefix` (12 hex characters, stored) finds the row, and the
SHA-256 of the whole token (stored) proves it. The secret carries 256 random bits, so a fast hash is
enough (a password hash is for guessable secrets); the comparison is constant-time, and a token with
an unknown prefix still costs one hash and one comparison, so timing does not tell whether a prefix
exists. The plaintext is never stored, logged, or put into an error or a record.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime, timedelta

from sqlalchemy import select, update

from orchestrator.errors import UsageError
from orchestrator.store.database import Database
from orchestrator.store.errors import RecordNotFound
from orchestrator.store.records import KeyInfo, KeyRole
from orchestrator.store.tables import ApiKeyRow

TOKEN_PREFIX = "cage_"
_TOKEN = re.compile(r"cage_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
_ROLES = ("admin", "user")
_DUMMY_HASH = hashlib.sha256(b"no such key").hexdigest()
LAST_USED_RESOLUTION = timedelta(minutes=1)
"""`last_used_at` is rewritten at most this often, so verifying a key is not a write per request."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _info(row: ApiKeyRow) -> KeyInfo:
    return KeyInfo(
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        role=row.role,
        owner=row.owner,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked=row.revoked,
    )


class KeyRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create_key(self, name: str, role: KeyRole, owner: str) -> tuple[str, str]:
        """A new key: returns `(key_id, plaintext)`. The plaintext cannot be recovered later.

        Raises:
            UsageError: unknown role.
        """
        if role not in _ROLES:
            raise UsageError(f"unknown key role {role!r}; expected admin or user")
        prefix = secrets.token_hex(6)
        token = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
        row = ApiKeyRow(
            id=f"key_{secrets.token_hex(8)}",
            name=name,
            prefix=prefix,
            hash=token_hash(token),
            role=role,
            owner=owner,
            created_at=self._db.clock(),
            last_used_at=None,
            revoked=False,
            revoked_at=None,
        )
        async with self._db.write() as tx:
            tx.add(row)
        return row.id, token

    async def verify(self, plaintext: str) -> KeyInfo | None:
        """The key `plaintext` belongs to; None when it is malformed, unknown or revoked."""
        match = _TOKEN.fullmatch(plaintext)
        async with self._db.read() as tx:
            row = (
                await tx.scalar(select(ApiKeyRow).where(ApiKeyRow.prefix == match.group(1)))
                if match
                else None
            )
        presented = token_hash(plaintext)
        stored = row.hash if row is not None else _DUMMY_HASH
        if not hmac.compare_digest(presented, stored) or row is None or row.revoked:
            return None
        now = self._db.clock()
        if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
            await self._touch(row.id, now)
            row.last_used_at = now
        return _info(row)

    async def _touch(self, key_id: str, now: datetime) -> None:
        async with self._db.write() as tx:
            await tx.execute(update(ApiKeyRow).where(ApiKeyRow.id == key_id).values(last_used_at=now))

    async def revoke(self, key_id: str) -> KeyInfo:
        """Revoke the key for good; revoking twice is harmless.

        Raises:
            RecordNotFound: no such key.
        """
        async with self._db.write() as tx:
            row = await tx.get(ApiKeyRow, key_id, with_for_update=True)
            if row is None:
                raise RecordNotFound("api key", key_id)
            if not row.revoked:
                row.revoked = True
                row.revoked_at = self._db.clock()
            return _info(row)

    async def get(self, key_id: str) -> KeyInfo | None:
        async with self._db.read() as tx:
            row = await tx.get(ApiKeyRow, key_id)
            return None if row is None else _info(row)

    async def list(self, *, owner: str | None = None, include_revoked: bool = False) -> list[KeyInfo]:
        """Keys, oldest first; one owner's when `owner` is given."""
        query = select(ApiKeyRow).order_by(ApiKeyRow.created_at, ApiKeyRow.id)
        if owner is not None:
            query = query.where(ApiKeyRow.owner == owner)
        if not include_revoked:
            query = query.where(ApiKeyRow.revoked.is_(False))
        async with self._db.read() as tx:
            return [_info(row) for row in await tx.scalars(query)]
