"""`Store`: the one object the rest of Cage holds for persistence."""

from __future__ import annotations

from types import TracebackType

from sqlalchemy.engine import URL, make_url

from orchestrator.settings import Settings
from orchestrator.store.assistants import AssistantRepository
from orchestrator.store.audit import AuditLog
from orchestrator.store.checkpoints import CheckpointRepository
from orchestrator.store.commands import CommandRepository
from orchestrator.store.database import Clock, Database, create_engine, ensure_sqlite_dir, utc_now
from orchestrator.store.events import EventLog
from orchestrator.store.keys import KeyRepository
from orchestrator.store.leases import LeaseRepository
from orchestrator.store.memory import MemoryRepository
from orchestrator.store.messages import MessageRepository
from orchestrator.store.notify import Notices
from orchestrator.store.rate_buckets import RateBucketRepository
from orchestrator.store.records import FinishedTurn, TurnRecord
from orchestrator.store.retention import Retention
from orchestrator.store.schema_version import at_head
from orchestrator.store.sessions import SessionRepository
from orchestrator.store.teams import TeamRepository
from orchestrator.store.turns import TurnRepository
from orchestrator.store.ws_tickets import WsTicketRepository


class Store:
    """Persistence on SQLite (a file, the default) or Postgres, by URL.

    ```python
    store = Store.from_settings(settings)
    await store.migrate()                  # the server migrates on start
    session = await store.sessions.create("alice", "tests.echo")
    await store.events.append(session.id, stamped_events)
    await store.aclose()
    ```
    Every method returns frozen records; no ORM object leaves the package.
    """

    def __init__(self, url: URL, *, clock: Clock = utc_now) -> None:
        self.url = url
        self._db = Database(create_engine(url), clock)
        self._closed = False
        self.sessions = SessionRepository(self._db)
        self.events = EventLog(self._db)
        self.messages = MessageRepository(self._db)
        self.leases = LeaseRepository(self._db)
        self.turns = TurnRepository(self._db, self.leases, self.events)
        self.checkpoints = CheckpointRepository(self._db)
        self.assistants = AssistantRepository(self._db)
        self.memory = MemoryRepository(self._db)
        self.keys = KeyRepository(self._db)
        self.teams = TeamRepository(self._db)
        self.retention = Retention(self._db)
        self.audit = AuditLog(self._db)
        self.commands = CommandRepository(self._db)
        self.rate_buckets = RateBucketRepository(self._db)
        """API keys' rate buckets shared by the replicas (Postgres; SQLite servers count in memory)."""
        self.ws_tickets = WsTicketRepository(self._db)
        """Websocket tickets any replica redeems (Postgres; SQLite servers keep them in memory)."""
        self.notices = Notices(url)
        """Other processes' notices on this database (Postgres; `enabled` is False on SQLite)."""

    @classmethod
    def from_url(cls, url: str | URL, *, clock: Clock = utc_now) -> Store:
        """A store on `url` (`sqlite+aiosqlite:///path` or `postgresql+asyncpg://...`). For a SQLite
        file the parent directory is created. Nothing is connected until the first query."""
        parsed = make_url(url)
        ensure_sqlite_dir(parsed)
        return cls(parsed, clock=clock)

    @classmethod
    def from_settings(cls, settings: Settings, *, clock: Clock = utc_now) -> Store:
        return cls.from_url(settings.resolved_database_url(), clock=clock)

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return self._db.dialect

    async def migrate(self) -> None:
        """Bring the schema to the newest revision; safe to run on every start.

        Raises:
            StoreError: the database cannot be reached or a migration fails.
        """
        if await at_head(self._db):  # the usual start: no Alembic import, no script reading
            return
        from orchestrator.store import migration  # Alembic: only when there is something to do

        await migration.upgrade(self.url)

    async def persist_turn(self, turn: FinishedTurn) -> TurnRecord:
        """Write a finished turn (messages, remaining events, usage, resume state) in one transaction.

        Raises:
            RecordNotFound: no such session.
            RecordExists: the turn was persisted already.
            EventSequenceError: the events do not continue the session's log; nothing was written.
        """
        return await self.turns.persist(turn)

    async def aclose(self) -> None:
        """Write what the event log has queued, then close every pooled connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        await self.notices.aclose()
        await self.events.drain()
        await self._db.aclose()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
