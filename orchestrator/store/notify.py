"""Postgres `LISTEN/NOTIFY` for one process: a dedicated asyncpg connection, reconnected on loss.

Writers send their notices inside their own transaction (`notify`), so Postgres delivers each one
only once that transaction has committed, and in commit order: a listener told of an event batch
can read it from the log at once. The listener is one connection per process (`Notices`), opened
on the first `listen()` and kept until the store closes. Every handler runs in the event loop and
must not block; it gets the notice's payload text.

A lost connection (the server restarted, a network cut) is noticed by asyncpg's termination
callback or by a keep-alive query every `KEEPALIVE_S`; the listener then reconnects with a
growing delay and calls every `on_connect` callback after each (re)connect, so its users re-read
what they may have missed meanwhile. SQLite has no notices: there `enabled` is False, `listen()`
registers nothing and `notify` sends nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

import structlog
from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncSession

log = structlog.get_logger(__name__)

EVENTS_CHANNEL = "cage_events"
"""Payload `<session id> <last seq>`: the session's log now reaches `last seq` (sent by each append)."""
COMMANDS_CHANNEL = "cage_turn_commands"
"""Payload `<command id>`: a steering command waits for the replica holding its turn."""
OUTCOMES_CHANNEL = "cage_turn_outcomes"
"""Payload `<command id>`: a steering command has its outcome."""
CHANNELS = (EVENTS_CHANNEL, COMMANDS_CHANNEL, OUTCOMES_CHANNEL)

APPLICATION_NAME = "cage-notices"
"""The listener connection's `application_name` (what `pg_stat_activity` shows for it)."""
KEEPALIVE_S = 5.0
"""The listener checks its connection this often (a query with the same timeout)."""
CONNECT_TIMEOUT_S = 10.0
RETRY_MIN_S = 0.2
RETRY_MAX_S = 5.0

Handler = Callable[[str], None]


async def notify(tx: AsyncSession, channel: str, payloads: Sequence[str]) -> None:
    """Send `payloads` on `channel` from the caller's transaction (Postgres only; one statement)."""
    if not payloads or tx.get_bind().dialect.name != "postgresql":
        return
    await tx.execute(
        text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:payloads AS text[])) AS p"),
        {"channel": channel, "payloads": list(payloads)},
    )


class Notices:
    """The process's listener on Cage's channels (Postgres; disabled on SQLite)."""

    def __init__(self, url: URL) -> None:
        self._dsn = (
            url.set(drivername="postgresql").render_as_string(hide_password=False)
            if url.get_backend_name() == "postgresql"
            else None
        )
        self._handlers: dict[str, list[Handler]] = {channel: [] for channel in CHANNELS}
        self._on_connect: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.connected = asyncio.Event()
        """Set while the listener's connection is up (tests wait on it)."""

    @property
    def enabled(self) -> bool:
        """True on Postgres: other processes' notices reach this one."""
        return self._dsn is not None

    def listen(self, channel: str, handler: Handler, *, on_connect: Callable[[], None] | None = None) -> None:
        """Call `handler(payload)` for every notice on `channel` (and `on_connect()` after each
        (re)connect); starts the listener if it is not running. Nothing on SQLite.

        Raises:
            ValueError: not one of Cage's channels.
        """
        if channel not in self._handlers:
            raise ValueError(f"unknown notice channel {channel!r}; one of {', '.join(CHANNELS)}")
        if not self.enabled or self._closed:
            return
        self._handlers[channel].append(handler)
        if on_connect is not None:
            self._on_connect.append(on_connect)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="cage-notices")

    async def aclose(self) -> None:
        """Stop listening and close the connection; idempotent."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        import asyncpg  # type: ignore[import-untyped]  # only a listening Postgres store loads it

        assert self._dsn is not None
        delay = RETRY_MIN_S
        while True:
            try:
                settings = {"application_name": APPLICATION_NAME}
                conn = await asyncpg.connect(self._dsn, timeout=CONNECT_TIMEOUT_S, server_settings=settings)
            except Exception as exc:  # noqa: BLE001 - refused, unreachable, bad DSN: try again later
                log.warning("notices.connect_failed", error=type(exc).__name__, retry_in_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            delay = RETRY_MIN_S
            lost = asyncio.Event()
            conn.add_termination_listener(lambda _conn, lost=lost: lost.set())
            try:
                for channel in CHANNELS:
                    await conn.add_listener(channel, self._dispatch)
                self.connected.set()
                log.info("notices.listening", channels=list(CHANNELS))
                for callback in list(self._on_connect):
                    _call(callback)
                while not lost.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lost.wait(), KEEPALIVE_S)
                        break
                    await conn.execute("SELECT 1", timeout=KEEPALIVE_S)
            except Exception as exc:  # noqa: BLE001 - whatever broke the connection, listen again
                log.warning("notices.connection_lost", error=type(exc).__name__)
            finally:
                self.connected.clear()
                conn.terminate()
            log.warning("notices.reconnecting", retry_in_s=delay)
            await asyncio.sleep(delay)

    def _dispatch(self, _conn: object, _pid: int, channel: str, payload: str) -> None:
        for handler in list(self._handlers.get(channel, ())):
            _call(handler, payload)


def _call(callback: Callable[..., None], *args: str) -> None:
    try:
        callback(*args)
    except Exception:  # one handler's bug must not stop the listener
        log.exception("notices.handler_failed", handler=getattr(callback, "__qualname__", repr(callback)))
