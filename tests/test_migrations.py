"""The Alembic migrations build exactly the schema the models declare, on SQLite and PostgreSQL."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

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
        with Session(engine) as session, session.begin():  # 0020 changes no table: today's models fit 0019
            user = User(username="alice")
            session.add(user)
            session.flush()
            project = Project(owner_id=user.id, slug="p", name="p", tags=[], metadata_={})
            session.add(project)
            session.flush()
            model = ModelRecord(project_id=project.id, owner_id=user.id, slug="m", name="m", metadata_={})
            session.add(model)
            session.flush()
            run = Run(model_id=model.id, status="completed")
            session.add(run)
            session.flush()
            session.add(ConsoleChunk(model_id=model.id, run_id=run.id, chunk_id=1, content=raw, line_count=1))
        upgrade_database(database_url)
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT content FROM console_chunks")).scalar_one()
    finally:
        engine.dispose()
    assert stored == "\rtrain: Scanning /x/labels/train... 16 images"
