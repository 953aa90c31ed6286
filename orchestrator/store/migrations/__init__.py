"""Alembic migrations of the store (script location; run them with `Store.migrate()`)."""
