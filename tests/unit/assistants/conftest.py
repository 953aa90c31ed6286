"""Registry fixtures: a real store (every test twice: a SQLite file and Postgres)."""

from tests.unit.pipeline.conftest import clock, store
from tests.unit.store.conftest import database_url, postgres_url

__all__ = ["clock", "database_url", "postgres_url", "store"]
