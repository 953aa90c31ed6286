"""The `claude` runner: Claude Code CLI (2.1.197) driven headless with stream-json in and out.

`ClaudeAdapter.build_exec()` gives the exec of a turn, `ClaudeAdapter.translator()` the
`ClaudeTranslator` that turns its stdout lines into protocol events. Pure: no Docker, no I/O.
"""

from runners.claude.adapter import INTERRUPT, ClaudeAdapter, user_line
from runners.claude.options import ClaudeOptions
from runners.claude.session import claude_session_id, claude_session_id_for
from runners.claude.translator import INTERRUPT_REQUEST_ID, ClaudeTranslator

CLI_VERSION = "2.1.197"
"""The Claude Code version the adapter and its golden transcripts were made with."""

__all__ = [
    "CLI_VERSION",
    "INTERRUPT",
    "INTERRUPT_REQUEST_ID",
    "ClaudeAdapter",
    "ClaudeOptions",
    "ClaudeTranslator",
    "claude_session_id",
    "claude_session_id_for",
    "user_line",
]
