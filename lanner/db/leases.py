"""Leases and shared locks: what lets any number of server processes, on any number of hosts, share one database
without two of them doing the same background work.

``Lease``: a row per background loop in the ``leases`` table (name, holder, expires_at), taken by whoever finds
it free or expired and renewed by its holder every third of ``LANNER_LEASE_SECONDS``; only the holder runs the
loop's passes (``lanner.periodic.BackgroundLoop``). Times are the database's clock, so the hosts' clocks never
have to agree. A process that stops releases its leases (another takes over on its next try, within a third of
the lease). One killed with -9 holds them until they expire (measured: the lease plus at most a third of it,
docs/benchmarks.md), except to a process on the same machine, which can prove it dead:

Dead holders on this machine: each row also names its holder's process as the kernel sees it
(``this_process``: the machine, the pid, the process's start time). A process that finds a lease held by one on
its own machine whose pid is free, a zombie, or another process's (a recycled pid: another start time) takes it
at once, by compare-and-set on the dead holder's name, so a server restarted after ``kill -9`` (or a crash, or
the OOM killer) leads its loops from its first try instead of a whole lease later. Nothing else is proof: a
holder on another machine, a live pid, a /proc that cannot be read, a row without the column (written before
migration 0028) all wait for expiry, since two leaders is the failure to avoid and a slow takeover only a delay.
"The machine" is this kernel's boot (``/proc/sys/kernel/random/boot_id``, random at every boot, so never
shared by two hosts) and this process's pid and time namespaces (containers on one kernel each count pids
their own way): not ``/etc/machine-id``, copied into every container made from one image, nor the hostname,
which a rescheduled pod keeps on another node, where a live holder's pid would look free.

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

import functools
import hashlib
import logging
import os
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Float, String, case, delete, func, literal_column, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Mapped, Session, mapped_column

from lanner.db import Base, Database, wakes


class LeaseRow(Base):
    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    holder: Mapped[str] = mapped_column(String(120))
    acquired_at: Mapped[float] = mapped_column(Float)  # seconds since the epoch, the database's clock
    expires_at: Mapped[float] = mapped_column(Float)
    process: Mapped[str | None] = mapped_column(String(120), nullable=True)  # this_process() of the holder


log = logging.getLogger("lanner.leases")


def _now(dialect: str) -> Any:
    """The database's clock in seconds since the epoch (a float: both dialects compare it the same way)."""
    if dialect == "postgresql":
        return literal_column("extract(epoch from clock_timestamp())")
    return (func.julianday("now") - 2440587.5) * 86400.0


def holder_name() -> str:
    """``host:pid:token``: which process holds a lease (the token tells apart several apps in one process)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@functools.cache
def this_machine() -> str | None:
    """This kernel boot and this process's pid and time namespaces, hashed: where a pid and a start time name one
    process. None where /proc cannot tell (not Linux, or a /proc of another pid namespace): no fast takeover."""
    try:
        parts = [Path("/proc/sys/kernel/random/boot_id").read_text().strip()]
        parts += [os.readlink(f"/proc/self/ns/{space}") for space in ("pid", "time")
                  if os.path.lexists(f"/proc/self/ns/{space}")]
        if _stat(os.getpid()) is None or int(Path("/proc/self/stat").read_text().split()[0]) != os.getpid():
            return None
    except (OSError, ValueError):
        return None
    return hashlib.blake2b("|".join(parts).encode(), digest_size=12).hexdigest()


def this_process() -> str | None:
    """``machine:pid:start``: the process writing a lease, as any process on its machine can check it (read at each
    write, so a process forked after its ``Lease`` was made names itself)."""
    machine, pid = this_machine(), os.getpid()
    try:
        stat = _stat(pid)
    except OSError:
        stat = None
    return f"{machine}:{pid}:{stat[1]}" if machine and stat else None


def _stat(pid: int) -> tuple[str, str] | None:
    """``pid``'s state letter and start time (clock ticks since boot) from /proc, None when there is no such
    process; other errors (a /proc that hides other users' processes) are raised."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # the command name, in parentheses, may hold spaces
    return fields[0], fields[19]


def provably_dead(process: str | None) -> bool:
    """Whether the holder ``process`` (its ``this_process``) has certainly ended: it ran on this machine and its
    pid is free, a zombie with no thread left, or a later process's. Any doubt answers False."""
    machine = this_machine()
    holder_machine, _, rest = (process or "").partition(":")
    pid_text, _, started = rest.partition(":")
    if machine is None or holder_machine != machine or not pid_text.isdigit() or int(pid_text) <= 0:
        return False
    pid = int(pid_text)
    try:
        os.kill(pid, 0)  # not fooled by a /proc mounted with hidepid
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # another user's process: it exists
    except OSError:
        return False
    try:
        stat = _stat(pid)
        if stat is None:
            return False  # it exited since the signal, or /proc hides it: the next try knows
        state, start = stat
        if start != started:
            return True  # the pid was recycled: its holder ended
        return state in ("Z", "X") and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return False


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
        """Take the lease if it is free, expired or its holder is provably dead, renew it if this holder has it:
        True while it does."""
        dialect = self.db.engine.dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        now = _now(dialect)
        table = LeaseRow.__table__
        process = this_process()
        statement = insert(table).values(name=self.name, holder=self.holder, acquired_at=now,
                                         expires_at=now + self._seconds(), process=process)
        excluded = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=[table.c.name],
            set_={"holder": self.holder, "expires_at": excluded.expires_at, "process": excluded.process,
                  "acquired_at": case((table.c.holder == self.holder, table.c.acquired_at),  # kept while renewed
                                      else_=excluded.acquired_at)},
            where=(table.c.holder == self.holder) | (table.c.expires_at < now),
        ).returning(table.c.holder)
        with self.db.engine.begin() as connection:
            if connection.execute(statement).first() is not None:
                return True
            held = connection.execute(select(table.c.holder, table.c.process)
                                      .where(table.c.name == self.name)).first()
        if held is None or not provably_dead(held.process):
            return False
        # Its holder died on this machine: take it now, only from that holder (another may have been quicker).
        with self.db.engine.begin() as connection:
            taken = connection.execute(update(table).where(table.c.name == self.name, table.c.holder == held.holder)
                                       .values(holder=self.holder, process=process, acquired_at=now,
                                               expires_at=now + self._seconds())).rowcount == 1
        if taken:
            log.info("lease %s: its holder %s (%s) is dead; taken at once", self.name, held.holder, held.process)
        return taken

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
