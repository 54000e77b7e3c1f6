"""The Alembic migrations build exactly the schema the models declare, on SQLite and PostgreSQL."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import column, create_engine, insert, table, text

from lanner.accounts.models import User
from lanner.db import Database, migrate, utcnow
from lanner.db.migrate import alembic_config, upgrade_database
from lanner.models_registry import metadata
from lanner.projects.models import ModelRecord, Project
from lanner.training.models import ConsoleChunk


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
            runs = table("runs", *(column(name) for name in ("id", "model_id", "status", "created_at", "attempt",
                                                                "smoke", "billed_seconds")))
            connection.execute(insert(runs).values(id=1, model_id="m1", status="completed", created_at=utcnow(),
                                                   attempt=0, smoke=False, billed_seconds=0.0))
            connection.execute(insert(ConsoleChunk.__table__).values(model_id="m1", run_id=1, chunk_id=1,
                                                                     content=raw, line_count=1))
        upgrade_database(database_url)
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT content FROM console_chunks")).scalar_one()
    finally:
        engine.dispose()
    assert stored == "\rtrain: Scanning /x/labels/train... 16 images"



def test_the_version_files_heads_are_alembics():
    """``ensure_migrated`` reads the heads from the version files' headers: the same heads Alembic finds."""
    heads = ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads()
    assert migrate.head_revisions() == frozenset(heads)


def test_version_files_the_header_reading_does_not_model_leave_the_answer_to_alembic(tmp_path, monkeypatch):
    (tmp_path / "versions").mkdir()
    monkeypatch.setattr(migrate, "MIGRATIONS", tmp_path)

    def heads(**files: str) -> frozenset[str] | None:
        for name, body in files.items():
            (tmp_path / "versions" / f"{name}.py").write_text(body)
        return migrate.head_revisions()

    assert heads(a="revision: str = 'a'\ndown_revision: str | None = None\n") == {"a"}
    assert heads(b="revision = 'b'\ndown_revision = 'a'\n", c="revision = 'c'\ndown_revision = 'a'\n") == {"b", "c"}
    assert heads(d="revision = 'd'\ndown_revision = ('b', 'c')\n") == {"d"}  # a merge
    assert heads(e="revision = 'e'\ndown_revision = 'd'\ndepends_on = 'x'\n") is None
    assert heads(e="revision = 'e'\ndown_revision = next_one()\n") is None
    assert heads(e="down_revision = 'd'\n") is None


def test_ensure_migrated_leaves_a_database_at_head_without_alembic(database_url, monkeypatch):
    """The CLI's start-up on a migrated database (issue 27): one SELECT, no Alembic."""
    def refuse(url: str) -> None:
        raise AssertionError("Alembic ran on a database at head")

    monkeypatch.setattr(migrate, "upgrade_database", refuse)
    db = Database(database_url)  # the test databases are made at head
    try:
        migrate.ensure_migrated(db)
    finally:
        db.dispose()


def test_ensure_migrated_brings_an_older_or_a_new_database_to_head(database_url, tmp_path):
    command.downgrade(alembic_config(database_url), "0019")
    for url in (database_url, f"sqlite:///{tmp_path / 'new.db'}"):
        db = Database(url)
        try:
            assert migrate.database_revisions(db.engine) != migrate.head_revisions()
            migrate.ensure_migrated(db)
            assert migrate.database_revisions(db.engine) == migrate.head_revisions()
        finally:
            db.dispose()
