"""The Alembic migrations build exactly the schema the models declare, on SQLite and PostgreSQL."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, insert, text

from lanner.accounts.models import User
from lanner.migrate import alembic_config, upgrade_database
from lanner.models_registry import metadata
from lanner.projects.models import ModelRecord, Project
from lanner.training.models import ConsoleChunk, Run


def test_migrations_match_the_models(database_url):
    upgrade_database(database_url)
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), metadata)
    finally:
        engine.dispose()
    assert diff == [], diff


def test_console_rows_stored_with_colour_codes_are_made_plain(database_url):
    """Rows from before ``training.console`` cleaned console text at ingestion lose their ANSI codes (0020)."""
    command.downgrade(alembic_config(database_url), "0019")  # the test databases are made at head
    engine = create_engine(database_url)
    raw = "\r\x1b[K\x1b[34m\x1b[1mtrain: \x1b[0mScanning /x/labels/train... 16 images"
    try:
        with engine.begin() as connection:  # only the columns 0019 has: today's models add some
            connection.execute(insert(User.__table__).values(id="u1", username="alice"))
            connection.execute(insert(Project.__table__).values(id="p1", owner_id="u1", slug="p", name="p", tags=[],
                                                                metadata={}))
            connection.execute(insert(ModelRecord.__table__).values(id="m1", project_id="p1", owner_id="u1",
                                                                    slug="m", name="m", metadata={}))
            connection.execute(insert(Run.__table__).values(id=1, model_id="m1", status="completed"))
            connection.execute(insert(ConsoleChunk.__table__).values(model_id="m1", run_id=1, chunk_id=1,
                                                                     content=raw, line_count=1))
        upgrade_database(database_url)
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT content FROM console_chunks")).scalar_one()
    finally:
        engine.dispose()
    assert stored == "\rtrain: Scanning /x/labels/train... 16 images"
