"""The claim and the poll shared by the supervisors that run jobs through an ``Executor`` (training runs, exports).

Why one helper: both keep a job's executor id in its row's ``external_id`` and did the same things twice: a
pass claims a row before it launches (``external_id`` set to ``launching:<time>`` by a compare-and-set, so two
server processes never launch one job), gives a claim back once the pass that took it has plainly died, asks
the executor how every launched job is, remembers since when a job's status could not be read, and hands each
status it read to the domain in a short transaction, on the row as it is now and only while its
``external_id`` is still the one polled (a job relaunched or ended meanwhile is left alone). What a status
means for a run or an export (lost, exited, timed out) stays in ``training.supervisor`` and ``exports.queue``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lanner.db import Database, utcnow
from lanner.training.executors.base import Executor, JobStatus

LAUNCHING = "launching:"  # external_id while a pass launches the job
STALE_LAUNCH_SECONDS = 300.0  # a claim this old belongs to a pass that died between its claim and the launch

Observe = Callable[[Session, Any, JobStatus], None]  # (session, row, status)
Release = Callable[[Any, str], None]  # (key, the stale claim)
Unreadable = Callable[[Any, str, datetime], None]  # (key, external_id, unreadable since)


class JobWatch:
    """The launched jobs of one table (``id`` and ``external_id`` columns) of one supervisor."""

    def __init__(self, db: Database, table: Any, *, what: str, log: logging.Logger) -> None:
        self.db = db
        self.table = table
        self.what = what  # "run", "export": for the log
        self.log = log
        self.unreadable_since: dict[Any, datetime] = {}  # key -> first of the status polls failing since

    def claim(self, session: Session, key: Any, *where: Any) -> bool:
        """Take the row for launching (its ``external_id`` unset, and ``where``); False: someone else has it."""
        table = self.table
        return session.execute(update(table).where(table.id == key, table.external_id.is_(None), *where)
                               .values(external_id=f"{LAUNCHING}{utcnow().isoformat()}")
                               .execution_options(synchronize_session=False)).rowcount == 1

    def poll(self, executor: Executor, *, observe: Observe, release_stale: Release,
             where: Iterable[Any] = (), unreadable: Unreadable | None = None) -> None:
        """Every row with an ``external_id`` (and ``where``): a stale claim is released; a launched job's status
        is read and observed; one that cannot be read is logged and, with ``unreadable``, reported with since
        when (the domain decides when that is too long)."""
        table = self.table
        with self.db.session() as session:
            launched = list(session.execute(select(table.id, table.external_id)
                                            .where(table.external_id.is_not(None), *where)))
        watched = {key for key, _ in launched}
        self.unreadable_since = {key: since for key, since in self.unreadable_since.items() if key in watched}
        for key, external_id in launched:
            if external_id.startswith(LAUNCHING):
                claimed_at = datetime.fromisoformat(external_id.removeprefix(LAUNCHING))
                if (utcnow() - claimed_at).total_seconds() > STALE_LAUNCH_SECONDS:
                    release_stale(key, external_id)
                continue
            try:
                status = executor.status(external_id)
            except Exception:
                if key not in self.unreadable_since:  # once, not at every pass for as long as it lasts
                    self.log.exception("could not poll %s %s (%s)", self.what, key, external_id)
                since = self.unreadable_since.setdefault(key, utcnow())
                if unreadable is not None:
                    unreadable(key, external_id, since)
                continue
            self.unreadable_since.pop(key, None)
            with self.db.session() as session:
                row = session.get(table, key)
                if row is None or row.external_id != external_id:
                    continue
                observe(session, row, status)

    def forget(self, key: Any) -> None:
        """The domain settled a job whose status could not be read: a later attempt starts a fresh count."""
        self.unreadable_since.pop(key, None)
