"""Session-wide test settings that pyproject.toml does not hold (it is part of the tai image's hash).

`make test` runs the suite in two passes: the tests not marked `serial` on several pytest-xdist
workers (`--dist loadfile`: a file's tests stay on one worker, in order), then the `serial` ones
alone. Importing `tests.run_ids` here, in the xdist controller before it starts its workers, fixes
the one run id (`CAGE_TEST_RUN`) that every worker inherits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import anyio
import pytest
from anyio.abc import TaskGroup

from tests import postgres_cluster
from tests.run_ids import WORKER  # the import sets CAGE_TEST_RUN, before the workers start


def pytest_configure(config: pytest.Config) -> None:
    # Like the socket entry in pyproject.toml: an asyncio transport an SDK client left to the garbage
    # collector warns in whatever test runs the GC, not in the one that leaked it.
    config.addinivalue_line(
        "filterwarnings",
        "ignore:Exception ignored in. <function _SelectorTransport.__del__:pytest.PytestUnraisableExceptionWarning",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked `databases("postgres")` (several replicas, notices) or `databases("sqlite")`
    (one process) is not generated for the other database of `database_url`: deselected, so a run
    reports no skip for a case that cannot exist."""
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("databases")
        callspec = getattr(item, "callspec", None)
        database = callspec.params.get("database_url") if callspec is not None else None
        if marker is not None and database is not None and database not in marker.args:
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not WORKER:  # the run's end (the xdist controller's comes after every worker's)
        postgres_cluster.stop_if_started()


@pytest.fixture
async def turn_tasks() -> AsyncIterator[TaskGroup]:
    """The task group a test's `PipelineService` runs its turns in, as the server's runtime or
    `cage run` hands it one. It is hosted by a task of its own: pytest-asyncio sets a fixture up
    and tears it down in other tasks than the test's, and a task group is left in the task that
    entered it."""
    ready: asyncio.Future[TaskGroup] = asyncio.get_running_loop().create_future()

    async def host() -> None:
        async with anyio.create_task_group() as tg:
            ready.set_result(tg)
            await anyio.sleep_forever()

    hosting = asyncio.get_running_loop().create_task(host())
    tg = await ready
    yield tg
    tg.cancel_scope.cancel()
    await hosting
