"""Checkpoints of a SQLite database's write-ahead log run by a thread of their own (``WalCheckpointer``), for a
writer whose commits should never wait for one. Ground floor: it knows no domain.

Why: SQLite checkpoints automatically inside the commit that takes the log past 1000 pages: it copies the
pages into the database file and syncs both files, 20 ms and more on a virtual disk. The webhook's group-commit
writer commits a batch every couple of milliseconds under load, so every ~20th batch stalled everyone waiting
on it for that long: most of the webhook's p99 (docs/benchmarks.md, "Webhook ingest", issue 19). Its
connections turn the automatic checkpoint off (``lanner.db.Database(auto_checkpoint=False)``) and nudge this
thread after their commits instead.

How: a PASSIVE checkpoint, which never blocks a writer or a reader, at most every ``interval`` seconds while
nudged. The log only starts again from its beginning when a checkpoint has caught up before the writer's next
transaction, which never happens while the writer is never idle; past ``restart_frames`` frames a RESTART
checkpoint waits (at most ``restart_wait`` seconds, or it gives up until the next nudge) for the writer to be
between two transactions and resets the log: one short pause instead of an ever-growing file. Other connections
keep SQLite's automatic checkpoint, so a log nobody nudges for is still checkpointed by its other writers.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

log = logging.getLogger("lanner.db.wal")


class WalCheckpointer:
    def __init__(self, path: str, *, interval: float = 0.25, restart_frames: int = 10_000,
                 restart_wait: float = 0.1) -> None:
        self.path = path
        self.interval = interval
        self.restart_frames = restart_frames
        self.restart_wait = restart_wait
        self.checkpoints = self.restarts = 0  # counted for tests and benchmarks
        self._nudged = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stopping.clear()
            self._thread = threading.Thread(target=self._run, name="lanner-wal-checkpoint", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stopping.set()
            self._nudged.set()
            thread.join(timeout)

    def nudge(self) -> None:
        """The log has grown (a commit): checkpoint it soon."""
        self._nudged.set()

    def _run(self) -> None:
        # The busy timeout bounds how long a RESTART may hold the writer back while it waits for readers.
        connection = sqlite3.connect(self.path, timeout=self.restart_wait, check_same_thread=False,
                                     isolation_level=None)
        try:
            while True:
                self._nudged.wait()
                if self._stopping.is_set():
                    return
                self._nudged.clear()
                self.checkpoint(connection)
                self._stopping.wait(self.interval)  # at most one checkpoint per interval, however many commits
        finally:
            connection.close()

    def checkpoint(self, connection: sqlite3.Connection) -> None:
        try:
            _, frames, _ = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self.checkpoints += 1
            if frames >= self.restart_frames:
                busy, _, _ = connection.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
                self.restarts += 0 if busy else 1
        except sqlite3.Error as error:  # the next nudge tries again; other writers still checkpoint meanwhile
            log.warning("WAL checkpoint of %s failed: %s", self.path, error)
