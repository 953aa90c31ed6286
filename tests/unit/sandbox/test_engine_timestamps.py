"""Docker's timestamps, read once for the backend, the egress sweep and the test session's cleanup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orchestrator.sandbox.docker.timestamps import engine_age, engine_time


def test_nanosecond_and_plain_timestamps_are_read_as_utc() -> None:
    assert engine_time("2026-12-01T19:31:14.123456789Z") == datetime(
        2026, 12, 1, 19, 31, 14, 123456, tzinfo=UTC
    )
    assert engine_time("2026-12-01T19:31:14Z") == datetime(2026, 12, 1, 19, 31, 14, tzinfo=UTC)
    assert engine_time("2026-12-01T20:31:14.5+01:00") == datetime(2026, 12, 1, 19, 31, 14, 500000, tzinfo=UTC)


def test_none_the_zero_time_and_garbage_are_no_time() -> None:
    for value in (None, "", "0001-01-01T00:00:00Z", "yesterday", "2026-13-40T99:00:00Z"):
        assert engine_time(value) is None, value


def test_the_age_of_a_timestamp_and_zero_when_unreadable() -> None:
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    assert 3599 < engine_age(hour_ago) < 3660  # an hour old (plus however long this line took)
    for value in (None, 17, "", "not a time"):
        assert engine_age(value) == 0.0
