"""Who a sandbox belongs to and what it is called, by lifecycle (DESIGN.md, "Config hash and identity").

Names are injective: every name is `cage-<hint>-<digest>`, where the digest is a sha256 over an
unambiguous encoding of the *whole* identity (`identity_key`: a kind tag and the ids, NUL-separated;
ids cannot contain NUL). The hint is a readable, cosmetic prefix (owner and assistant, cut short);
the readable parts live in `cage.*` labels. Two identities share a name only if sha256 collides on
its first 96 bits, so owner `acme` asking for workspace `ci-default` never lands on owner
`acme-ci`'s `default` (the old `<owner>-<workspace>` concatenation did).

* `oneshot`: a fresh random name per turn;
* `session`: a digest of (owner, assistant, session, workspace scope);
* `longrunning` / `persistent`: a digest of (owner, assistant, workspace scope), where the scope is
  the assistant's own default workspace or a `workspace_id` the request named (`workspace.py`).

Ids are validated (`[A-Za-z0-9_.-]{1,64}`) before they reach a name, a label or a volume, so nobody
can smuggle a path, a flag or a second label into the engine.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from pydantic import BaseModel, ConfigDict

from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.errors import UsageError, WorkspaceError

_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")
MAX_NAME = 120
DEFAULT_WORKSPACE = "default"
DIGEST_HEX = 24
"""Hex digits of the identity digest in a name (96 bits)."""
HINT_CHARS = 40


def validate_id(kind: str, value: str) -> str:
    """`value` when it is a safe id, else `WorkspaceError` naming the kind of id."""
    if not _ID.fullmatch(value) or value in (".", ".."):
        raise WorkspaceError(value, f"invalid {kind} id: use 1-64 of A-Z a-z 0-9 _ . -")
    return value


def identity_key(kind: str, *parts: str) -> bytes:
    """The unambiguous encoding of an identity: `kind`, then each part, NUL-separated.

    Injective for validated ids (they never contain NUL) and a fixed kind: the parts can be read
    back by splitting on NUL, so distinct inputs never give the same bytes.
    """
    for part in (kind, *parts):
        if "\0" in part:
            raise ValueError("identity parts cannot contain NUL")
    return "\0".join((kind, *parts)).encode()


def digest_name(prefix: str, hint: str, key: bytes) -> str:
    """`<prefix>-<hint>-<digest of key>`: Docker's name charset, at most `MAX_NAME` characters."""
    clean = _NAME_BAD.sub("-", hint)[:HINT_CHARS].strip("-._")
    digest = hashlib.sha256(key).hexdigest()[:DIGEST_HEX]
    return f"{prefix}-{clean}-{digest}" if clean else f"{prefix}-{digest}"


def container_name(raw: str) -> str:
    """`raw` in Docker's name charset (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`), unique even when shortened.

    The pre-digest naming; kept to find resources made by earlier versions (migration).
    """
    name = _NAME_BAD.sub("-", raw)
    if not name or not name[0].isalnum():
        name = f"c{name}"
    if len(name) > MAX_NAME or name != raw:
        digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
        name = f"{name[: MAX_NAME - 11]}-{digest}"
    return name


class SandboxIdentity(BaseModel):
    """The key a sandbox is found by; `name` is its engine name and its lock key."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    lifecycle: Lifecycle
    name: str
    owner: str
    assistant_id: str
    workspace_id: str
    session_id: str | None = None
    shared_workspace: bool = False
    """True when the request named a `workspace_id` (deliberate sharing within the owner)."""


def identity_for(
    lifecycle: Lifecycle, *, owner: str, assistant_id: str, session_id: str | None, workspace_id: str | None
) -> SandboxIdentity:
    """The identity of the sandbox serving this request.

    Raises:
        WorkspaceError: an id has characters outside `[A-Za-z0-9_.-]` or is too long.
        UsageError: a `session` sandbox without a session id.
    """
    validate_id("owner", owner)
    validate_id("assistant", assistant_id)
    workspace = validate_id("workspace", workspace_id or DEFAULT_WORKSPACE)
    if session_id is not None:
        validate_id("session", session_id)
    hint = f"{owner}-{assistant_id}"
    scope = "default" if workspace_id is None else f"shared:{workspace}"  # ids never contain ':'
    if lifecycle is Lifecycle.ONESHOT:
        name = f"cage-{secrets.token_hex(8)}"
    elif lifecycle is Lifecycle.SESSION:
        if not session_id:
            raise UsageError("a session sandbox needs a session id")
        name = digest_name("cage", hint, identity_key("session", owner, assistant_id, session_id, scope))
    else:
        name = digest_name("cage", hint, identity_key("workspace-box", owner, assistant_id, scope))
    return SandboxIdentity(
        lifecycle=lifecycle,
        name=name,
        owner=owner,
        assistant_id=assistant_id,
        workspace_id=workspace,
        session_id=session_id,
        shared_workspace=workspace_id is not None,
    )
