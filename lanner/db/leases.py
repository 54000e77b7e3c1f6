"""Leases and shared locks: what lets any number of server processes, on any number of hosts, share one database
without two of them doing the same background work.

``Lease``: a row per background loop in the ``leases`` table (name, holder, expires_at), taken by whoever finds
it free or expired and renewed by its holder every third of ``LANNER_LEASE_SECONDS``; only the holder runs the
loop's passes (``lanner.periodic.BackgroundLoop``). Times are the database's clock, so the hosts' clocks never
have to agree. A process that stops releases its leases (another takes over on its next try, within a third of
the lease); one killed with -9, or a host that vanished, holds them until they expire: measured takeover after
``kill -9`` is the lease plus at most a third of it (docs/benchmarks.md).

Why a table rather than PostgreSQL's session-level advisory locks (which the server frees the moment the
holder's connection drops, so takeover would be faster): an advisory lock lives on one connection, and a
connection that broke while its process still runs (a network blip, a restarted PgBouncer) frees the lock
silently while the old leader carries on, so two leaders run until it notices; a lease expires on the
database's clock whatever the holder believes, renewals that fail tell the holder it lost it, and the table
shows an operator who leads what (``SELECT * FROM leases``). It also works unchanged on SQLite, where one
process takes every lease at once. Correctness never rests on the lease alone: the work itself is claimed by
compare-and-set (runs, import and export jobs, deployments), so the rare overlap of an expired leader still in
a pass and its successor cannot do one thing twice; the lease makes one process do each loop's work, the claims
make that safe.

``shared_lock``: a lock held until the end of the transaction by every process of every host, for a check
followed by a write that must not interleave with another process's (the free training slots, the imports per
user): ``pg_advisory_xact_lock`` on PostgreSQL; on SQLite the transaction already holds the database's write
lock (``BEGIN IMMEDIATE``), which is just as shared."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
from collections.abc import Callable
from typing import Any

from sqlalchemy import Float, String, case, delete, func, literal_column, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Mapped, Session, mapped_column

from lanner.db import Base, Database, wakes


class LeaseRow(Base):
    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    holder: Mapped[str] = mapped_column(String(120))
    acquired_at: Mapped[float] = mapped_column(Float)  # seconds since the epoch, the database's clock
    expires_at: Mapped[float] = mapped_column(Float)


def _now(dialect: str) -> Any:
    """The database's clock in seconds since the epoch (a float: both dialects compare it the same way)."""
    if dialect == "postgresql":
        return literal_column("extract(epoch from clock_timestamp())")
    return (func.julianday("now") - 2440587.5) * 86400.0


def holder_name() -> str:
    """``host:pid:token``: which process holds a lease (the token tells apart several apps in one process)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class Lease:
    """One loop's lease, as one holder sees it; ``seconds`` is read at each renewal."""

    def __init__(self, db: Database, name: str, seconds: Callable[[], float]) -> None:
        self.db = db
        self.name = name
        self.holder = holder_name()
        self._seconds = seconds

    def renew_every(self) -> float:
        return max(0.05, self._seconds() / 3)

    def hold(self) -> bool:
        """Take the lease if it is free or expired, renew it if this holder has it: True while it does."""
        dialect = self.db.engine.dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        now = _now(dialect)
        table = LeaseRow.__table__
        statement = insert(table).values(name=self.name, holder=self.holder, acquired_at=now,
                                         expires_at=now + self._seconds())
        excluded = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=[table.c.name],
            set_={"holder": self.holder, "expires_at": excluded.expires_at,  # acquired_at kept while renewed
                  "acquired_at": case((table.c.holder == self.holder, table.c.acquired_at),
                                      else_=excluded.acquired_at)},
            where=(table.c.holder == self.holder) | (table.c.expires_at < now),
        ).returning(table.c.holder)
        with self.db.engine.begin() as connection:
            return connection.execute(statement).first() is not None

    def wake_leader(self) -> None:
        """Wake this loop in the process that leads it (``lanner.db.wakes``: PostgreSQL's NOTIFY)."""
        wakes.publish(self.db, self.name)

    def subscribe(self, wake: Callable[[], None]) -> Callable[[], None]:
        """``wake`` is called when another process wakes this loop; returns what unsubscribes."""
        return wakes.subscribe(self.db, self.name, wake)

    def release(self) -> None:
        """Give it up now (a stopping server): another process takes over on its next try."""
        with self.db.engine.begin() as connection:
            connection.execute(delete(LeaseRow).where(LeaseRow.name == self.name, LeaseRow.holder == self.holder))


def holders(session: Session) -> dict[str, str]:
    """Who holds each unexpired lease (for status views and tests)."""
    now = _now(session.get_bind().dialect.name)
    rows = session.execute(select(LeaseRow.name, LeaseRow.holder).where(LeaseRow.expires_at >= now))
    return {name: holder for name, holder in rows}


def shared_lock(session: Session, name: str) -> None:
    """Hold the lock ``name`` until ``session``'s transaction ends, across every process on the database."""
    if session.get_bind().dialect.name != "postgresql":
        return  # SQLite: the transaction began with BEGIN IMMEDIATE, the database's one write lock
    key = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
