"""Matching a `ToolRequest` against the `permissions` rules of `sandbox.yao`.

Tool patterns are globs on the canonical tool name (`*` matches anything, `mcp:github/*` every
tool of that server). Argument patterns are globs on `ToolRequest.subject`:

* file tools (`read`, `write`, `edit`, `ls`, `glob`, `grep`): a path glob, where `*` and `?`
  stay inside one folder and `**` crosses folders (`secrets/**`, `**/*.pem`). The path is
  normalised first (`./` dropped, `..` resolved, an absolute path under the workspace made
  relative), so `./secrets/../secrets/key` is `secrets/key` and `/workspace/secrets/key` too;
* every other tool (`bash` commands, `fetch` URLs, MCP tools): a plain glob where `*` matches
  anything (`git *`).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass

from orchestrator.dsl.permissions import PermissionMode, PermissionPolicy, PermissionRule, RuleAction
from orchestrator.globs import path_glob
from orchestrator.permissions.requests import ToolRequest

PATH_TOOLS = frozenset({"read", "write", "edit", "ls", "glob", "grep"})
"""Tools whose subject is a path (matched as a path glob)."""
WORKSPACE = "/workspace"


@dataclass(frozen=True, slots=True)
class RuleVerdict:
    """What the policy says about one request: the action and the rule that chose it."""

    action: RuleAction
    rule: PermissionRule | None
    """None: no rule matched, the mode decided."""

    @property
    def rule_text(self) -> str | None:
        return self.rule.text() if self.rule is not None else None


def normalise_path(path: str, workspace: str = WORKSPACE) -> str:
    """`./a/../b` -> `b`; `/workspace/b` -> `b`; other absolute paths stay absolute."""
    text = path.strip()
    if not text:
        return ""
    root = workspace.rstrip("/") or "/"
    absolute = text.startswith("/")
    norm = posixpath.normpath(text if absolute else posixpath.join(root, text))
    if norm == root:
        return "."
    if norm.startswith(root + "/"):
        return norm[len(root) + 1 :]
    return norm


def path_matches(pattern: str, path: str, workspace: str = WORKSPACE) -> bool:
    """Whether the (normalised) `path` matches the path glob `pattern`."""
    subject = normalise_path(path, workspace)
    glob = pattern.strip()
    if glob.startswith("/"):
        glob = normalise_path(glob, workspace) if glob.rstrip("/") != workspace.rstrip("/") else "."
    else:
        glob = glob.removeprefix("./")
    regex = path_glob(glob)
    return bool(regex.match(subject)) or (glob.endswith("/**") and subject == glob[:-3])


def tool_matches(pattern: str, tool: str) -> bool:
    return fnmatch.fnmatchcase(tool.lower(), pattern)


def rule_matches(rule: PermissionRule, request: ToolRequest, workspace: str = WORKSPACE) -> bool:
    if not tool_matches(rule.tool, request.tool):
        return False
    if rule.subject is None:
        return True
    if request.tool.lower() in PATH_TOOLS:
        return path_matches(rule.subject, request.subject, workspace)
    return fnmatch.fnmatchcase(request.subject, rule.subject)


def verdict(
    policy: PermissionPolicy,
    request: ToolRequest,
    *,
    extra: tuple[PermissionRule, ...] = (),
    workspace: str = WORKSPACE,
) -> RuleVerdict:
    """The first matching rule's action (`extra` rules, the session's "allow always" ones, come
    first), else the mode's: `bypass` allows, `ask` asks, `deny` denies."""
    for rule in (*extra, *policy.rules):
        if rule_matches(rule, request, workspace):
            return RuleVerdict(rule.action, rule)
    by_mode: dict[PermissionMode, RuleAction] = {
        PermissionMode.BYPASS: "allow",
        PermissionMode.ASK: "ask",
        PermissionMode.DENY: "deny",
    }
    return RuleVerdict(by_mode[policy.mode], None)


def always_rule(request: ToolRequest) -> PermissionRule:
    """The rule "allow always" adds: this tool with this exact subject (any call when it has none).

    Glob characters in the subject are escaped, so allowing `rm *.log` never allows `rm x`.
    """
    if not request.subject:
        return PermissionRule(action="allow", tool=_escape(request.tool.lower()))
    return PermissionRule(
        action="allow", tool=_escape(request.tool.lower()), subject=_escape(request.subject)
    )


def _escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)
