"""Who is calling: API keys (`Authorization: Bearer cage_...`), the bootstrap admin key, `CAGE_AUTH=off`.

A user key sees only its owner's sessions, sandboxes and memory; an admin key sees everything and
may use `/v1/admin/`. Key material never reaches a log line, an error message or an audit entry.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict

from orchestrator.api.ratelimit import KeyLimiter
from orchestrator.errors import Forbidden, NotFound, Unauthorized, UsageError
from orchestrator.redaction import register_secret
from orchestrator.settings import Settings
from orchestrator.store import Store

log = structlog.get_logger(__name__)

BOOTSTRAP_KEY_ID = "bootstrap"
DEV_OWNER = "local"


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether `host` (a bind address or a `Host` header's name) is on this machine only."""
    name = host.strip().lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_off_refusal(host: str) -> str:
    return (
        f"CAGE_AUTH=off is only allowed on a loopback address, and CAGE_HOST is {host!r}: "
        "bind 127.0.0.1, or keep authentication on and create a key with `cage keys create`"
    )


def check_auth_mode(settings: Settings) -> None:
    """Refuse authentication off on an address other machines can reach.

    Raises:
        UsageError: `CAGE_AUTH=off` with a non-loopback `CAGE_HOST`.
    """
    off = settings.auth.strip().lower() in ("off", "false", "0", "no")
    if off and not is_loopback(settings.host):
        raise UsageError(auth_off_refusal(settings.host))


class Principal(BaseModel):
    """The caller of one request."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    key_id: str
    name: str
    owner: str
    role: Literal["admin", "user"]

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    def require_admin(self) -> None:
        """Raises:
        Forbidden: the key has the `user` role.
        """
        if not self.is_admin:
            raise Forbidden("this route needs an admin API key")

    def require_owner(self, owner: str, kind: str, item_id: str) -> None:
        """Users may only touch their own things; someone else's thing looks absent (404), not
        forbidden, so ids cannot be probed.

        Raises:
            NotFound: the thing belongs to another owner.
        """
        if not self.is_admin and owner != self.owner:
            raise NotFound(f"{kind} {item_id!r} not found")


DEV_PRINCIPAL = Principal(key_id="auth-off", name="auth off", owner=DEV_OWNER, role="admin")


class Authenticator:
    """Turns a bearer token into a `Principal`, and applies the per-key rate limit."""

    def __init__(self, store: Store, settings: Settings, limiter: KeyLimiter) -> None:
        self._store = store
        self._limiter = limiter
        self.enabled = settings.auth.strip().lower() not in ("off", "false", "0", "no")
        if not self.enabled and not is_loopback(settings.host):
            raise UsageError(auth_off_refusal(settings.host))
        self._bootstrap = settings.bootstrap_admin_key or None
        self._bootstrap_open = self._bootstrap is not None
        register_secret(self._bootstrap)

    async def still_valid(self, principal: Principal) -> bool:
        """Whether the key behind `principal` still works (not revoked, not deleted); checked
        again and again by open websockets and event streams."""
        if not self.enabled or principal.key_id == BOOTSTRAP_KEY_ID:
            return self._bootstrap_open or not self.enabled
        info = await self._store.keys.get(principal.key_id)
        return info is not None and not info.revoked

    def announce(self) -> None:
        """Log how the server authenticates; loudly when it does not."""
        if not self.enabled:
            log.warning(
                "AUTHENTICATION IS OFF (CAGE_AUTH=off): every caller is an admin. "
                "Use this for local development only."
            )
        elif self._bootstrap is not None:
            log.warning("bootstrap admin key accepted until the first admin key is created")

    async def authenticate(self, token: str | None) -> Principal:
        """The principal for `token`; rate-limited per key.

        Raises:
            Unauthorized: no token, or one that is malformed, unknown or revoked.
            KeyRateLimited: the key is over its rate.
        """
        if not self.enabled:
            return DEV_PRINCIPAL
        if not token:
            raise Unauthorized("missing API key: send it as a bearer token in the Authorization header")
        principal = await self._bootstrap_principal(token)
        if principal is None:
            info = await self._store.keys.verify(token)
            if info is None:
                raise Unauthorized("invalid or revoked API key")
            principal = Principal(key_id=info.id, name=info.name, owner=info.owner, role=info.role)
        await self._limiter.take(principal.key_id)
        return principal

    async def _bootstrap_principal(self, token: str) -> Principal | None:
        if not self._bootstrap_open or self._bootstrap is None:
            return None
        if not hmac.compare_digest(token.encode(), self._bootstrap.encode()):
            return None
        if any(k.role == "admin" for k in await self._store.keys.list()):
            self._bootstrap_open = False  # a real admin key exists: the bootstrap key is done
            log.warning("bootstrap admin key refused: an admin key exists now")
            return None
        return Principal(key_id=BOOTSTRAP_KEY_ID, name="bootstrap", owner="admin", role="admin")
