"""``lanner.db.wal.WalCheckpointer``: a writer whose connections never checkpoint still gets its write-ahead log
copied into the database and, once the log passes ``restart_frames``, started again from its beginning."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from lanner.db import Database
from lanner.db.wal import WalCheckpointer


def _log_frames(path: Path) -> int:
    """Frames the log file holds (header, then 24 bytes and a 4096-byte page per frame), read without
    checkpointing: asking SQLite would copy them."""
    size = path.with_name(path.name + "-wal").stat().st_size
    return max(0, (size - 32) // (4096 + 24))


def _wait_for(condition, what: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_the_writer_connections_leave_checkpoints_to_the_checkpointer(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    shared, own = Database(f"sqlite:///{path}"), Database(f"sqlite:///{path}", auto_checkpoint=False)
    assert own.sqlite_path() == str(path) and Database("sqlite://").sqlite_path() is None
    try:
        with shared.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 1000
        with own.engine.begin() as connection:
            assert connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
            connection.exec_driver_sql("CREATE TABLE t (x BLOB)")
            for _ in range(1500):  # past the automatic checkpoint's 1000 pages: nothing copied in the commit
                connection.exec_driver_sql("INSERT INTO t VALUES (randomblob(4000))")
        assert _log_frames(path) > 1500

        checkpointer = WalCheckpointer(str(path), interval=0.0, restart_frames=1000)
        checkpointer.start()
        try:
            checkpointer.nudge()
            _wait_for(lambda: checkpointer.restarts == 1, "a checkpoint and a restart of the log")
        finally:
            checkpointer.stop()
        with own.engine.begin() as connection:  # the next transaction writes from the log's beginning
            connection.exec_driver_sql("INSERT INTO t VALUES (randomblob(4000))")
        raw = sqlite3.connect(path)
        try:
            busy, frames, copied = raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            assert (busy, copied) == (0, frames) and frames < 10, frames
            assert raw.execute("SELECT count(*) FROM t").fetchone()[0] == 1501
        finally:
            raw.close()
    finally:
        shared.dispose()
        own.dispose()
