"""Who a sandbox belongs to and what it is called, by lifecycle (DESIGN.md, "Config hash and identity").

* `oneshot`: a fresh random name per turn;
* `session`: `<owner>-<assistant>-<chat>`;
* `longrunning` / `persistent`: `<owner>-<assistant>.<workspace>`.

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


def validate_id(kind: str, value: str) -> str:
    """`value` when it is a safe id, else `WorkspaceError` naming the kind of id."""
    if not _ID.fullmatch(value) or value in (".", ".."):
        raise WorkspaceError(value, f"invalid {kind} id: use 1-64 of A-Z a-z 0-9 _ . -")
    return value


def container_name(raw: str) -> str:
    """`raw` in Docker's name charset (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`), unique even when shortened."""
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
    chat_id: str | None = None


def identity_for(
    lifecycle: Lifecycle, *, owner: str, assistant_id: str, chat_id: str | None, workspace_id: str | None
) -> SandboxIdentity:
    """The identity of the sandbox serving this request.

    Raises:
        WorkspaceError: an id has characters outside `[A-Za-z0-9_.-]` or is too long.
        UsageError: a `session` sandbox without a chat id.
    """
    validate_id("owner", owner)
    validate_id("assistant", assistant_id)
    workspace = validate_id("workspace", workspace_id or DEFAULT_WORKSPACE)
    if chat_id is not None:
        validate_id("chat", chat_id)
    if lifecycle is Lifecycle.ONESHOT:
        raw = f"cage-{secrets.token_hex(8)}"
    elif lifecycle is Lifecycle.SESSION:
        if not chat_id:
            raise UsageError("a session sandbox needs a chat id")
        raw = f"{owner}-{assistant_id}-{chat_id}"
    else:
        raw = f"{owner}-{assistant_id}.{workspace}"
    return SandboxIdentity(
        lifecycle=lifecycle,
        name=container_name(raw),
        owner=owner,
        assistant_id=assistant_id,
        workspace_id=workspace,
        chat_id=chat_id,
    )
