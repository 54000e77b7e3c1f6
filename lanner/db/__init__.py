"""Database engine, sessions and the declarative base shared by every domain."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import JSON, DateTime, MetaData, String, create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.types import TypeDecorator

log = logging.getLogger("lanner.db")
# Every SQLite transaction takes the write lock (BEGIN IMMEDIATE, below), so one held for long stalls every
# request behind it for up to the busy timeout (30 s): such a transaction is logged with where it ended.
SLOW_TRANSACTION_SECONDS = 5.0

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(value: datetime | None) -> str | None:
    """The wire's timestamp format: ISO 8601 in UTC with a ``Z``, as the hosted platform writes it."""
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def new_id() -> str:
    """Opaque 20-character ids, like the hosted platform's document ids."""
    return secrets.token_hex(10)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both SQLite (which drops tzinfo) and PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON(), list[Any]: JSON()}


class TimestampMixin:
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


def id_column() -> Mapped[str]:
    return mapped_column(String(32), primary_key=True, default=new_id)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _read_only(dbapi_connection: Any, _record: Any) -> None:
    """A reader's connection: autocommit (each SELECT its own snapshot, no BEGIN, so no lock held between
    statements), and ``query_only`` so that a write through it fails instead of taking the write lock."""
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA query_only=ON")


def _no_auto_checkpoint(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.execute("PRAGMA wal_autocheckpoint=0")


def _json_dumps(value: Any) -> str:
    """orjson: several times faster than the standard library on the metrics dicts the trainer sends."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _begin_immediate(conn: Any) -> None:
    conn.connection.driver_connection.execute("BEGIN IMMEDIATE")
    conn.info["lock_taken_at"] = time.monotonic()


def _lock_released(conn: Any) -> None:
    taken = conn.info.pop("lock_taken_at", None)
    if taken is not None and (held := time.monotonic() - taken) > SLOW_TRANSACTION_SECONDS:
        log.warning("a transaction held the database's write lock for %.1f s: requests waited behind it",
                    held, stack_info=True)


def make_engine(url: str, *, auto_checkpoint: bool = True) -> Engine:
    """``auto_checkpoint=False``: SQLite connections that never checkpoint the write-ahead log themselves, for a
    writer that has ``lanner.db.wal.WalCheckpointer`` do it off its commits (other connections still do)."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=20,
                               json_serializer=_json_dumps, json_deserializer=orjson.loads)
        event.listen(engine, "connect", _sqlite_pragmas)
        if not auto_checkpoint:
            event.listen(engine, "connect", _no_auto_checkpoint)
        # SQLite's own BEGIN is deferred; take the write lock up front so concurrent writers queue
        # instead of failing with "database is locked" on lock upgrade. On the driver's connection: SQLAlchemy's
        # statement machinery cost a fifth of an empty transaction (~30 µs, every transaction of every request).
        event.listen(engine, "begin", _begin_immediate)
        event.listen(engine, "commit", _lock_released)
        event.listen(engine, "rollback", _lock_released)

        @event.listens_for(engine, "connect")
        def _no_pysqlite_begin(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None

        return engine
    return create_engine(url, pool_size=20, max_overflow=20, pool_pre_ping=True, json_serializer=_json_dumps,
                         json_deserializer=orjson.loads)


class Database:
    """One engine and session factory per app (tests make several)."""

    def __init__(self, url: str, *, auto_checkpoint: bool = True) -> None:
        self.url = url
        self.engine = make_engine(url, auto_checkpoint=auto_checkpoint)
        self.session_factory = sessionmaker(self.engine, expire_on_commit=False)
        self._readers: sessionmaker[Session] | None = None
        self._readers_lock = threading.Lock()  # built on first use, once, by whichever request thread comes first

    @contextmanager
    def read_session(self) -> Iterator[Session]:
        """A unit of work that only reads. On SQLite it takes no lock: every ``session()`` takes the write lock
        (BEGIN IMMEDIATE), so a burst of reads there (a trainer fetching a dataset's 230 images at once through
        the blob route) queued every request behind it past the 30 s busy timeout; a write-ahead-log reader never
        waits for a writer nor makes one wait. Elsewhere (PostgreSQL, an in-memory SQLite) it is ``session()``."""
        if self.sqlite_path() is None:  # PostgreSQL (readers never wait there), or an in-memory database
            with self.session() as session:
                yield session
            return
        with self._readers_lock:
            if self._readers is None:
                readers = create_engine(self.url, connect_args={"check_same_thread": False, "timeout": 30},
                                        pool_size=20, json_serializer=_json_dumps, json_deserializer=orjson.loads)
                event.listen(readers, "connect", _sqlite_pragmas)
                event.listen(readers, "connect", _read_only)
                self._readers = sessionmaker(readers, expire_on_commit=False)
        session = self._readers()
        try:
            yield session
        finally:
            session.close()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: committed on success, rolled back on error."""
        session = self.session_factory()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def sqlite_path(self) -> str | None:
        """The database file, on SQLite with one (not in memory); None otherwise."""
        url = self.engine.url
        if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
            return None
        return url.database

    def dispose(self) -> None:
        self.engine.dispose()
        if self._readers is not None:
            self._readers.kw["bind"].dispose()


def after_commit(session: Session, callback: Callable[[], Any]) -> None:
    """Run ``callback`` once ``session``'s transaction has committed; never if it rolls back first. For work
    that must see the committed state, or must not happen if the request fails (waking the import queue,
    deleting the blobs a purge let go of)."""
    pending = [callback]

    def committed(_: Session) -> None:
        if pending:
            pending.pop()()

    event.listen(session, "after_commit", committed, once=True)
    event.listen(session, "after_rollback", lambda _: pending.clear(), once=True)


ACTOR_KEY = "actor_id"


def set_actor(session: Session, user_id: str | None) -> None:
    """Who the session's changes are made for: the request's caller, read by the activity log's flush hook
    (``lanner.teams.activity``) so that every write in the request is attributed without passing it along."""
    if user_id:
        session.info[ACTOR_KEY] = user_id
