"""Grants: what one per-turn gateway token may reach, and the registry that issues and revokes them.

A token is 256 random bits (`secrets.token_urlsafe`), issued for one turn in one sandbox and
bound to the upstreams that turn may use (its model connector, its HTTP MCP servers). It is
revoked when the turn ends, and expires after `ttl` anyway, so a token a background process or
an exfiltrated log still holds is dead by the time anyone could use it. Tokens are compared by
dictionary lookup on their SHA-256, never stored or logged in clear.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from orchestrator.stream import Usage

UpstreamKind = Literal["model", "mcp"]
DEFAULT_TTL = 24 * 3600.0
"""Seconds a token lives at most even if its turn never ends (a crashed bridge)."""


@dataclass(frozen=True)
class Upstream:
    """One real endpoint a grant may reach, and the credentials the gateway adds on the way."""

    kind: UpstreamKind
    id: str
    """The connector or MCP server id (the path segment after `/model/` or `/mcp/`)."""
    origin: str
    """`scheme://host[:port]` of the real endpoint."""
    base_path: str
    """The real URL's path (`/v1`, or empty); requests must stay below it."""
    headers: Mapping[str, str] = field(repr=False, default_factory=dict)
    """Credential headers added to every request (secrets)."""


@dataclass
class Grant:
    """A live token's binding: sandbox, owner, turn, the upstreams it may use, and its metered usage."""

    token_digest: str
    sandbox: str
    owner: str
    assistant_id: str
    turn_id: str
    upstreams: Mapping[tuple[UpstreamKind, str], Upstream]
    expires_at: float
    usage: Usage = field(default_factory=lambda: Usage(scope="turn"))
    requests: int = 0

    def upstream(self, kind: UpstreamKind, upstream_id: str) -> Upstream | None:
        return self.upstreams.get((kind, upstream_id))

    def record(self, usage: Usage) -> None:
        self.requests += 1
        self.usage = self.usage + usage


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class GrantRegistry:
    """Live grants by token digest; `issue` at turn start, `revoke` at turn end."""

    def __init__(self, *, ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._grants: dict[str, Grant] = {}
        self._usage_by_owner: dict[str, Usage] = {}

    def issue(
        self, *, sandbox: str, owner: str, assistant_id: str, turn_id: str, upstreams: Iterable[Upstream]
    ) -> tuple[str, Grant]:
        """A new token (returned once, in clear) and its grant."""
        self._expire()
        token = "cage-gw-" + secrets.token_urlsafe(32)
        grant = Grant(
            token_digest=token_digest(token),
            sandbox=sandbox,
            owner=owner,
            assistant_id=assistant_id,
            turn_id=turn_id,
            upstreams={(u.kind, u.id): u for u in upstreams},
            expires_at=self._clock() + self._ttl,
        )
        self._grants[grant.token_digest] = grant
        return token, grant

    def lookup(self, token: str) -> Grant | None:
        """The live grant of `token`, or None (unknown, revoked or expired)."""
        grant = self._grants.get(token_digest(token))
        if grant is None or grant.expires_at <= self._clock():
            return None
        return grant

    def revoke(self, grant: Grant) -> Usage:
        """End the grant; its usage is added to its owner's total and returned."""
        if self._grants.pop(grant.token_digest, None) is not None:
            total = self._usage_by_owner.get(grant.owner, Usage(scope="cumulative"))
            self._usage_by_owner[grant.owner] = total + grant.usage
        return grant.usage

    def revoke_sandbox(self, sandbox: str) -> int:
        """Revoke every grant of `sandbox` (it is being removed); returns how many."""
        doomed = [g for g in self._grants.values() if g.sandbox == sandbox]
        for grant in doomed:
            self.revoke(grant)
        return len(doomed)

    def owner_usage(self, owner: str) -> Usage:
        """Usage metered for `owner` over every ended grant of this process."""
        return self._usage_by_owner.get(owner, Usage(scope="cumulative"))

    def __len__(self) -> int:
        return len(self._grants)

    def _expire(self) -> None:
        now = self._clock()
        for grant in [g for g in self._grants.values() if g.expires_at <= now]:
            self.revoke(grant)
