"""Session-wide test settings that pyproject.toml does not hold (it is part of the tai image's hash)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Like the socket entry in pyproject.toml: an asyncio transport an SDK client left to the garbage
    # collector warns in whatever test runs the GC, not in the one that leaked it.
    config.addinivalue_line(
        "filterwarnings",
        "ignore:Exception ignored in. <function _SelectorTransport.__del__:pytest.PytestUnraisableExceptionWarning",
    )
