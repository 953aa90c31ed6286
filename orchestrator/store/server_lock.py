"""One `cage serve` per SQLite database: an exclusive lock on `<database>.serve.lock`.

SQLite is the embedded, single-process default: a second server on the same file would run a second
set of in-process turns, sandboxes and reapers over the same rows. `cage serve` takes this lock
before it starts and keeps it for its lifetime; the operating system releases it when the process
ends however it ends (`kill -9` too), so a restart after a crash is never refused. The lock file
names the holder (pid, host, start time), which the refusal repeats. Several replicas need Postgres.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import IO

from orchestrator.errors import UsageError


class ServerLock:
    """Held from `acquire` until `release` (or the process's end)."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = database.with_name(database.name + ".serve.lock")
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock, or refuse naming the database file and the process holding it.

        Raises:
            UsageError: another `cage serve` holds this database.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        file = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            holder = _describe(file.read())
            file.close()
            raise UsageError(
                f"database {self.database} is in use by another cage serve ({holder}); SQLite serves one"
                " process: stop that server, or give every replica the same Postgres database"
                " (CAGE_DATABASE_URL=postgresql+asyncpg://...)"
            ) from None
        file.seek(0)
        file.truncate()
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        file.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started}))
        file.flush()
        self._file = file

    def release(self) -> None:
        if self._file is None:
            return
        with contextlib.suppress(OSError):
            self._file.truncate(0)
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        self._file.close()
        self._file = None


def _describe(text: str) -> str:
    try:
        data = json.loads(text)
        pid, host, started = int(data["pid"]), str(data["host"])[:100], str(data["started"])[:40]
    except (ValueError, KeyError, TypeError):
        return "a process that has not written its name yet"
    return f"pid {pid} on host {host}, started {started}"
