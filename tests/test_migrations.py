"""The Alembic migrations build exactly the schema the models declare, on SQLite and PostgreSQL."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from lanner.migrate import upgrade_database
from lanner.models_registry import metadata


def test_migrations_match_the_models(database_url):
    upgrade_database(database_url)
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), metadata)
    finally:
        engine.dispose()
    assert diff == [], diff
