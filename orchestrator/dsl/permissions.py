"""`permissions` in `sandbox.yao`: who decides, before a tool runs, whether the agent may use it.

```json
"permissions": {
  "mode": "ask",
  "timeout": "2m",
  "default": "deny",
  "rules": [
    {"allow": {"bash": "git *"}},
    {"deny": {"write": "secrets/**"}},
    {"ask": "mcp:github/*"}
  ]
}
```
Rules are tried in order; the first whose tool pattern matches the tool's canonical name (and
whose argument pattern, when given, matches the call's subject) decides. No rule matches: the
mode decides (`bypass` allows, `ask` asks the client, `deny` refuses). A question nobody answers
by `timeout` is decided by `default`.
"""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.attribute_docs import describe_fields
from orchestrator.dsl.units import Duration

_STRICT = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)
DEFAULT_TIMEOUT = timedelta(minutes=5)
_ACTIONS = ("allow", "deny", "ask")


class PermissionMode(enum.StrEnum):
    BYPASS = "bypass"
    """Everything is allowed (today's behaviour); rules may still deny or ask."""
    ASK = "ask"
    """A call no rule decides is put to the client."""
    DENY = "deny"
    """A call no rule decides is refused."""


RuleAction = Literal["allow", "deny", "ask"]


def _check_pattern(pattern: str, what: str) -> str:
    if not pattern.strip():
        raise ValueError(f"the {what} pattern must not be empty")
    if "\x00" in pattern or "\n" in pattern:
        raise ValueError(f"the {what} pattern must be one line of text")
    return pattern


class PermissionRule(BaseModel):
    """`{allow|deny|ask: "<tool pattern>"}` or `{allow|deny|ask: {"<tool>": "<argument pattern>"}}`."""

    model_config = _STRICT
    action: RuleAction
    tool: str
    """A glob on the canonical tool name: `bash`, `write`, `mcp:github/*`, `*`."""
    subject: str | None = None
    """A glob on the call's subject: the command for `bash`, a path glob (`**` crosses folders)
    for file tools, the URL for `fetch`; None matches any call of the tool."""

    @model_validator(mode="before")
    @classmethod
    def _from_yao(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "action" in data:
            return data
        actions = [k for k in data if k in _ACTIONS]
        others = [k for k in data if k not in _ACTIONS]
        if others:
            raise ValueError(f"unknown key {others[0]!r}: a rule is one of allow, deny or ask")
        if len(actions) != 1:
            raise ValueError("a rule has exactly one key: allow, deny or ask")
        action = actions[0]
        target = data[action]
        if isinstance(target, str):
            return {"action": action, "tool": target}
        if isinstance(target, dict) and len(target) == 1:
            [(tool, subject)] = target.items()
            if not isinstance(subject, str):
                raise ValueError(f"{action}: the argument pattern of {tool!r} must be a string")
            return {"action": action, "tool": tool, "subject": subject}
        raise ValueError(
            f'{action}: expected a tool pattern ("bash") or one tool with its argument pattern '
            f'({{"bash": "git *"}})'
        )

    @field_validator("tool")
    @classmethod
    def _tool(cls, v: str) -> str:
        return _check_pattern(v, "tool").strip().lower()

    @field_validator("subject")
    @classmethod
    def _subject(cls, v: str | None) -> str | None:
        return None if v is None else _check_pattern(v, "argument")

    def text(self) -> str:
        """The rule as written, for events and the audit log: `deny write secrets/**`."""
        return f"{self.action} {self.tool}" + (f" {self.subject}" if self.subject is not None else "")


class PermissionPolicy(BaseModel):
    """`permissions` in `sandbox.yao`."""

    model_config = _STRICT
    mode: PermissionMode = PermissionMode.BYPASS
    """`bypass` (default: allow), `ask` (ask the client) or `deny`, for calls no rule decides."""
    timeout: Duration = DEFAULT_TIMEOUT
    """How long a question to the client waits for an answer (default 5m)."""
    default: Literal["allow", "deny"] = "deny"
    """The decision when nobody answers by `timeout`."""
    rules: tuple[PermissionRule, ...] = Field(default=(), max_length=500)
    """Tried in order; the first match decides."""

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, v: timedelta) -> timedelta:
        if v <= timedelta(0):
            raise ValueError("the timeout must be longer than 0s")
        if v > timedelta(hours=24):
            raise ValueError("the timeout must be at most 24h")
        return v

    @property
    def asks(self) -> bool:
        """False for `bypass` without rules: nothing is ever checked (runners keep bypassing)."""
        return self.mode is not PermissionMode.BYPASS or bool(self.rules)
