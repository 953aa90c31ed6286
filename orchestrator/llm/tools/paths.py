"""Workspace paths: what the model writes, checked and made relative to the workspace root."""

from __future__ import annotations

import posixpath

from orchestrator.errors import ToolError


def workspace_path(raw: str, root: str, *, tool: str = "") -> str:
    """`raw` (relative, or absolute under `root`) as a normalised relative path (`.` for the root).

    Raises:
        ToolError: the path is empty or leaves the workspace (`..`, another absolute path).
    """
    text = raw.strip()
    if not text:
        raise ToolError(tool, "empty path")
    if "\x00" in text:
        raise ToolError(tool, "path contains a NUL byte")
    root = posixpath.normpath(root)
    if text.startswith("/"):
        normal = posixpath.normpath(text)
        if normal != root and not normal.startswith(root.rstrip("/") + "/"):
            raise ToolError(tool, f"path {raw!r} is outside the workspace {root}")
        text = posixpath.relpath(normal, root)
    relative = posixpath.normpath(text)
    if relative == ".." or relative.startswith("../"):
        raise ToolError(tool, f"path {raw!r} leaves the workspace")
    return relative
