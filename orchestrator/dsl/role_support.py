"""Which `runner.connectors` roles each runner can use, and why not the others.

A runner drives one model endpoint (the `default` role's connector, else the assistant's). Other
roles name other *models* of that endpoint, mapped where the runner has a setting for them:

- `claude`: `light` -> Claude Code's small/fast model and the `haiku` alias its sub-agents ask for
  (`ANTHROPIC_SMALL_FAST_MODEL`, `ANTHROPIC_DEFAULT_HAIKU_MODEL`); `heavy` -> the `opus` alias
  (`ANTHROPIC_DEFAULT_OPUS_MODEL`);
- `opencode`: `light` -> `small_model` (titles, summaries);
- `yaocode` (the loop runs on the host, so these may be any endpoint): `light` writes the
  compaction summaries, `vision` describes attached images when the `default` connector has no
  vision (`orchestrator.pipeline.modes.vision_fallback`);
- `tai`: `light` writes the compaction summaries (another model of the same endpoint: `cage-tai`
  in the box reaches the model gateway only);
- `codex`: the `default` role only.

`vision` and `audio` have no setting in any CLI (each one's main model reads images itself). A role a
runner cannot use loads with a warning naming file, line and key (`cage validate --strict` fails
on it) and is dropped: Yao's own sample apps set such roles. A role whose connector is at another
endpoint than the runner's is refused when the turn starts (`orchestrator.pipeline.modes.roles`).
"""

from __future__ import annotations

RUNNER_ROLES: dict[str, frozenset[str]] = {
    "claude": frozenset({"default", "light", "heavy"}),
    "opencode": frozenset({"default", "light"}),
    "codex": frozenset({"default"}),
    "yaocode": frozenset({"default", "light", "vision"}),
    "tai": frozenset({"default", "light"}),
}
"""The roles each runner maps to one of its settings."""


def role_refusal(runner: str, role: str) -> str | None:
    """Why `runner` cannot use a `role` connector, or None when it can."""
    if role in RUNNER_ROLES.get(runner, frozenset({"default"})):
        return None
    usable = ", ".join(sorted(RUNNER_ROLES.get(runner, frozenset({"default"}))))
    return f"the {runner} runner has no setting for a {role} model (it uses: {usable}); the role is ignored"
