"""Helpers to write small application directories in `tmp_path`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

AppWriter = Callable[[dict[str, str]], Path]

CHAT_PROMPTS = "- role: system\n  content: You help.\n"


@pytest.fixture
def write_app(tmp_path: Path) -> AppWriter:
    """Write `{relative path: text}` under a fresh app dir and return the dir."""

    def write(files: dict[str, str]) -> Path:
        for rel, text in files.items():
            path = tmp_path / "app" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        (tmp_path / "app").mkdir(exist_ok=True)
        return tmp_path / "app"

    return write
