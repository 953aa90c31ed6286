"""The ids that keep parallel test workers apart (tests/run_ids.py): every process id of one run ends
in the run's id, and no other run's id is taken for this run's."""

from __future__ import annotations

import pytest

from tests import run_ids
from tests.run_ids import TEST_RUN, of_this_run, process_run_id


def test_process_ids_are_unique_in_their_first_characters_and_of_this_run() -> None:
    first, second = process_run_id(), process_run_id()
    assert first[:8] != second[:8]  # names cut the id short: cage-egress-test-<id[:8]>
    assert of_this_run(first) and of_this_run(second)


@pytest.mark.parametrize(
    "value",
    [
        "0123456789abcdef0123456789abcdef",  # another run's (or the old uuid4().hex format)
        TEST_RUN,  # the bare run id is no process's
        "",
        f"{TEST_RUN}0123456789abcdef",  # the run id in front: not how a process id is made
    ],
)
def test_other_values_are_not_of_this_run(value: str) -> None:
    assert not of_this_run(value)


def test_names_get_the_worker_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_ids, "WORKER", "gw1")
    assert run_ids.per_worker("cage-egress-test-ab") == "cage-egress-test-ab-gw1"
    assert run_ids.per_worker("cage-egress-test-ab-gw1") == "cage-egress-test-ab-gw1"
    monkeypatch.setattr(run_ids, "WORKER", "")
    assert run_ids.per_worker("cage-egress") == "cage-egress"
