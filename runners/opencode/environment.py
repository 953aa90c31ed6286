"""The exec environment of an opencode turn: HOME and XDG dirs in the workspace, the kill
switches that keep it offline and quiet, and the secrets its config refers to."""

from __future__ import annotations

from runners.base import TurnRequest
from runners.opencode.layout import Layout
from runners.opencode.options import OpencodeOptions

KILL_SWITCHES: dict[str, str] = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE_PROMPT": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE_SKILLS": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
    "OPENCODE_DISABLE_MOUSE": "1",
    "OPENCODE_DISABLE_EMBEDDED_WEB_UI": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
}
"""Always set (reference/clis.md §2): no catalog fetch, update check, LSP or plugin download,
share link, `~/.claude` reading; no project-level `opencode.json` overriding the generated one."""


def build_env(
    turn: TurnRequest, layout: Layout, options: OpencodeOptions, secrets: dict[str, str]
) -> dict[str, str]:
    """The whole env: the assistant's `environment` first, Cage's own values win over it."""
    env = dict(turn.environment)
    env.update(
        {
            "HOME": layout.home,
            "XDG_CONFIG_HOME": layout.config_home,
            "XDG_DATA_HOME": layout.data_home,
            "XDG_CACHE_HOME": layout.cache_home,
            "XDG_STATE_HOME": layout.state_home,
            "OPENCODE_CONFIG": layout.config_file,
            "OPENCODE_CLIENT": "cli",
            **KILL_SWITCHES,
        }
    )
    if options.bash_timeout_ms is not None:
        env["OPENCODE_EXPERIMENTAL_BASH_DEFAULT_TIMEOUT_MS"] = str(options.bash_timeout_ms)
    env.update(secrets)
    return env
