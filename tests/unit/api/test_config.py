"""`ApiConfig` from the environment: a setting renamed in 2026-12 is still read under its old name."""

from __future__ import annotations

import pytest

from orchestrator.api.config import ApiConfig


def test_the_session_cap_is_read_under_its_name_and_its_old_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAGE_MAX_SESSIONS_PER_OWNER", raising=False)
    monkeypatch.delenv("CAGE_MAX_CHATS_PER_OWNER", raising=False)
    assert ApiConfig().max_sessions_per_owner == 10_000
    monkeypatch.setenv("CAGE_MAX_CHATS_PER_OWNER", "7")
    assert ApiConfig().max_sessions_per_owner == 7
    monkeypatch.setenv("CAGE_MAX_SESSIONS_PER_OWNER", "9")  # the current name wins
    assert ApiConfig().max_sessions_per_owner == 9
    assert ApiConfig(max_sessions_per_owner=3).max_sessions_per_owner == 3
    monkeypatch.setenv("CAGE_MAX_SESSIONS_PER_OWNER", "0")
    with pytest.raises(ValueError, match=r"max_sessions_per_owner|CAGE_MAX_SESSIONS_PER_OWNER"):
        ApiConfig()
