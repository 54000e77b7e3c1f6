"""What every ``lanner`` command module shares: settings, a migrated database, one transaction per command, and
refusals as one red line on stderr with exit code 1 (stdout carries only the value asked for)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from sqlalchemy.orm import Session

from lanner import models_registry  # noqa: F401  (every table on the metadata: see context())
from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.config import get_settings
from lanner.context import AppContext
from lanner.db.migrate import ensure_migrated
from lanner.errors import LannerError

err = Console(stderr=True)


def context() -> AppContext:
    """Settings and a migrated database. Every domain's tables are on the metadata (``models_registry``), as in
    the server: a flush orders tables by their foreign keys, and a key to a table that no imported module declares
    fails it (a top-up's ledger row names ``runs``); Alembic's check imported them all before ``ensure_migrated``
    made it cheap."""
    ctx = AppContext.from_settings(get_settings())
    ensure_migrated(ctx.db)
    return ctx


def fail(message: str) -> NoReturn:
    err.print(f"[red]error:[/red] {message}", soft_wrap=True)  # one line: scripts and tests grep it
    raise typer.Exit(code=1)


@contextmanager
def refusals() -> Iterator[None]:
    """A refused action (``LannerError``) is one red line and exit code 1."""
    try:
        yield
    except LannerError as exc:
        fail(exc.message)


@contextmanager
def command_session() -> Iterator[tuple[AppContext, Session]]:
    """Every command's frame: settings, a migrated database and one transaction, committed when the command's
    block ends; a refused action is one red line and exit code 1, with nothing written."""
    ctx = context()
    with refusals(), ctx.db.session() as session:
        yield ctx, session


def act_as(session: Session, username: str) -> Principal:
    """Act as user ``username`` (their tier and access), as their own API key would."""
    return Principal.of(accounts_service.require_user(session, username=username))
