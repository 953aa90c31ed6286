"""Who a test process is: the ids that keep parallel workers (pytest-xdist) and other test sessions
on one Docker engine apart.

* `TEST_RUN`: one id for the whole `pytest` invocation. The first import sets `CAGE_TEST_RUN`; the
  xdist controller imports this module (through `tests/conftest.py`) before it starts its workers,
  which inherit the variable, so every worker of one run reads the same value.
* `process_run_id()`: this process's own id, `<16 random hex><TEST_RUN>`: unique per worker in its
  first characters (names cut it short: `TEST_RUN_ID[:8]`), and tells by its tail which run made a
  leftover (`of_this_run`), so no worker ever sweeps another worker's things.
* `WORKER`: the xdist worker id (`gw0`, ...), or "" when pytest runs without `-n`.
"""

from __future__ import annotations

import os
import uuid

RUN_ENV = "CAGE_TEST_RUN"
TEST_RUN = os.environ.setdefault(RUN_ENV, uuid.uuid4().hex[:16])
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")


def process_run_id() -> str:
    """A fresh id for this process's things (labels, names), ending in this run's `TEST_RUN`."""
    return f"{uuid.uuid4().hex[:16]}{TEST_RUN}"


def of_this_run(label_value: str) -> bool:
    """True when a `cage.test-run` label value was made by a process of this run (any worker)."""
    return len(label_value) > len(TEST_RUN) and label_value.endswith(TEST_RUN)


def per_worker(name: str) -> str:
    """`name` made unique per xdist worker (`<name>-gw1`); unchanged without workers."""
    return f"{name}-{WORKER}" if WORKER and not name.endswith(f"-{WORKER}") else name
