"""Alembic, driven from code: ``lanner serve`` and the tests bring any database to the head revision.

A CLI command asks first whether the database is there already (``ensure_migrated``): on a database at head
that answer is one ``SELECT`` and a read of the version files' headers, where Alembic's own check imports Alembic
and runs its environment and every migration script (0.12 s of CPU of a warm ``lanner estimate``'s 1.5, issue
27). Alembic still runs whenever the answer is anything but a plain yes."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Engine

    from lanner.db import Database

MIGRATIONS = Path(__file__).parent.parent / "migrations"  # lanner/migrations
# A version file's module-level assignments of these names (``revision: str = '0023'``), as Alembic writes them.
_HEADER = re.compile(r"^(revision|down_revision|depends_on)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.MULTILINE)


def alembic_config(url: str) -> Config:
    from alembic.config import Config  # start-up cost: only when Alembic runs

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.set_main_option("file_template", "%%(year)d_%%(month).2d_%%(day).2d_%%(rev)s_%%(slug)s")
    return config


def upgrade_database(url: str, revision: str = "head") -> None:
    from alembic import command  # start-up cost: only when Alembic runs

    command.upgrade(alembic_config(url), revision)


def head_revisions() -> frozenset[str] | None:
    """The revisions no migration revises (Alembic's heads), from each version file's ``revision`` and
    ``down_revision`` literals; None (Alembic decides) for a file without both or with ``depends_on``, whose
    effect on the heads this reading does not model."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        header = dict(_HEADER.findall(path.read_text()))
        try:
            revision = ast.literal_eval(header["revision"])
            down = ast.literal_eval(header["down_revision"])
            depends_on = ast.literal_eval(header.get("depends_on", "None"))
        except (KeyError, ValueError, SyntaxError):
            return None
        if not isinstance(revision, str) or depends_on is not None:
            return None
        revisions.add(revision)
        revised.update([down] if isinstance(down, str) else down or ())
    return frozenset(revisions - revised) or None


def database_revisions(engine: Engine) -> frozenset[str] | None:
    """What the database's ``alembic_version`` holds; None where it cannot be read (a new database)."""
    try:
        with engine.connect() as connection:
            return frozenset(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())
    except SQLAlchemyError:
        return None


def ensure_migrated(db: Database) -> None:
    """Bring the database to head unless it is there: Alembic runs only when a migration is due (or when its
    version files say something ``head_revisions`` does not read)."""
    heads = head_revisions()
    if heads is None or database_revisions(db.engine) != heads:
        upgrade_database(db.url)
