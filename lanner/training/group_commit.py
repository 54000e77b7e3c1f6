"""Group commit for training webhooks.

The trainer reports every few seconds per run, and a busy server holds many runs. Committing each event in its
own transaction spends most of the time in transaction overhead (and, on SQLite, in the single write lock).
One writer thread instead takes whatever events are waiting, applies each inside a SAVEPOINT of one shared
transaction, commits once, and only then answers each request: a 200 still means "stored". Events keep their
arrival order, a bad event fails alone, and if the shared commit itself fails every event is retried in a
transaction of its own.

After the first event of a batch the writer lingers while events keep arriving (until the stream pauses for
``gap_seconds``, at most ``linger_seconds``): a few hundred microseconds of waiting turn many tiny commits into
one. Measured in benchmarks/webhook_ingest.py (docs/benchmarks.md).

On SQLite the writer commits on connections of its own that never checkpoint the write-ahead log inside a
commit; a thread of its own does (``lanner.db.wal``), so no batch waits for a checkpoint's copy and syncs.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from lanner.accounts.principal import Principal
from lanner.db import Database
from lanner.db.wal import WalCheckpointer
from lanner.errors import LannerError
from lanner.gpus.catalogue import Catalogue
from lanner.training import protocol
from lanner.training.schemas import MetricsEvent
from lanner.training.writes import HOT_EVENTS, BatchState

log = logging.getLogger("lanner.ingest")
_STOP = object()


@dataclass
class _Item:
    principal: Principal
    body: MetricsEvent
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop


def _resolve(answers: list[tuple[asyncio.Future, tuple[bool, Any]]]) -> None:
    """On the requests' event loop: hand each waiting request its outcome (one call per batch and loop)."""
    for future, (ok, value) in answers:
        if future.done():  # the client went away and its request was cancelled
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


class GroupCommitWriter:
    def __init__(self, db: Database, public_url: str, catalogue: Catalogue, *, max_batch: int = 512,
                 linger_seconds: float = 0.002, gap_seconds: float = 0.0005) -> None:
        path = db.sqlite_path()
        self._db = Database(db.url, auto_checkpoint=False) if path else db
        self.checkpointer = WalCheckpointer(path) if path else None
        self._public_url = public_url
        self._catalogue = catalogue
        self._max_batch = max_batch
        self._linger = linger_seconds
        self._gap = gap_seconds
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lanner-ingest", daemon=True)
                self._thread.start()
                if self.checkpointer is not None:
                    self.checkpointer.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish every queued event, then end the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            self._queue.put(_STOP)
            thread.join(timeout)
        if self.checkpointer is not None:
            self.checkpointer.stop()
            self._db.dispose()  # its own connections (the app's engine is the app's to dispose)

    async def submit(self, principal: Principal, body: MetricsEvent) -> dict[str, Any]:
        thread = self._thread  # started by the lifespan: look without the lock, take it only to (re)start
        if thread is None or not thread.is_alive():
            self.start()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put(_Item(principal, body, future, loop))
        return await future

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            batch = [first]
            stop = False
            deadline = time.monotonic() + self._linger
            while len(batch) < self._max_batch:
                try:
                    # Linger briefly for more events: one commit then serves them all (group commit).
                    # Stop as soon as the stream pauses: waiting on an idle queue would only add latency.
                    item = self._queue.get(timeout=max(0.0, min(self._gap, deadline - time.monotonic())))
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                batch.append(item)
            self._process(batch)
            if self.checkpointer is not None:
                self.checkpointer.nudge()
            if stop:
                return

    def _apply(self, session: Any, state: BatchState, item: _Item) -> tuple[bool, Any]:
        ctx = protocol.EventContext(session, item.principal, self._public_url, self._catalogue, state)
        try:
            if item.body.event in HOT_EVENTS:
                # Validated and looked up before anything is queued, so a failure leaves nothing behind.
                return True, protocol.handle_event(ctx, item.body)
            with session.begin_nested():
                return True, protocol.handle_event(ctx, item.body)
        except LannerError as exc:
            return False, exc

    def _process(self, batch: list[_Item]) -> None:
        try:
            with self._db.session() as session:
                state = BatchState()
                state.prefetch(session, (item.body for item in batch))
                outcomes = [self._apply(session, state, item) for item in batch]
                state.finish(session)
        except Exception:
            log.exception("batch of %d events failed; retrying one by one", len(batch))
            outcomes = [self._process_one(item) for item in batch]
        self._answer(batch, outcomes)

    @staticmethod
    def _answer(batch: list[_Item], outcomes: list[tuple[bool, Any]]) -> None:
        """Wake each event loop once per batch, not once per event: every wake-up is a write to the loop's
        self-pipe and a pass of the loop, per event that was as much as the rest of the hand-off."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, tuple[bool, Any]]]] = {}
        for item, outcome in zip(batch, outcomes, strict=True):
            by_loop.setdefault(item.loop, []).append((item.future, outcome))
        for loop, answers in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, answers)
            except RuntimeError:  # that loop is closed: nobody is waiting for these answers any more
                log.warning("%d answers for a closed event loop dropped (their callers are gone)", len(answers))

    def _process_one(self, item: _Item) -> tuple[bool, Any]:
        try:
            with self._db.session() as session:
                state = BatchState()
                outcome = self._apply(session, state, item)
                state.finish(session)
                return outcome
        except Exception as exc:  # an unexpected failure answers 500 for this event alone
            log.exception("event %s failed", item.body.event)
            return False, exc
