"""Claude Code conversation ids, and the launcher that picks `--session-id` or `--resume`.

Claude Code keeps a conversation in `$HOME/.claude/projects/<cwd>/<session id>.jsonl`. Cage
chooses the id itself (a UUIDv5 of assistant and session), so the id is known before the CLI runs.
Whether the conversation already exists is a fact about the workspace, not about Cage's store:
a first turn that failed on a model error has still created it, and a lost store has not
deleted it. Measured on 2.1.197, `--session-id` on an existing id exits 1 ("Session ID … is
already in use") and `--resume` on a missing one exits 1 ("No conversation found"). So the
exec is a tiny `sh` launcher that looks for the session file and picks the flag; the id and the
flags travel as positional parameters, never spliced into the script.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

SESSION_NAMESPACE = uuid.UUID("5d0c4a9e-61f3-4b8e-9a57-0c6a2f1e7b34")
"""Namespace of Cage's Claude session ids (fixed: changing it orphans every stored conversation)."""

RESUME_KEY = "session_id"
"""Key of the session id in `TurnRequest.resume` / `Translator.resume_state`."""

LAUNCHER = (
    'sid="$1"; shift; '
    'if ls "$HOME"/.claude/projects/*/"$sid".jsonl >/dev/null 2>&1; '
    'then exec claude --resume "$sid" "$@"; fi; '
    'exec claude --session-id "$sid" "$@"'
)
"""`sh -c` script: `$1` is the session id, the rest are Claude Code's flags."""
LAUNCHER_NAME = "cage-claude"
"""`$0` of the launcher (what `ps` shows until `exec`)."""


def claude_session_id_for(assistant_id: str, session_id: str) -> str:
    """The deterministic Claude session id of one (assistant, session) conversation."""
    return str(uuid.uuid5(SESSION_NAMESPACE, f"{assistant_id}\x00{session_id}"))


def claude_session_id(assistant_id: str, session_id: str, resume: Mapping[str, str]) -> str:
    """The id to run this turn with: the one the previous turn reported, if it is a UUID, else
    the deterministic one."""
    reported = resume.get(RESUME_KEY, "")
    try:
        return str(uuid.UUID(reported))
    except ValueError:
        return claude_session_id_for(assistant_id, session_id)
