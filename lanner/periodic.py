"""The one base of every background loop of a server process (``BackgroundLoop``): the training supervisor, the
import and export queues, maintenance, the endpoint supervisor and its request log, the assistants. Ground
floor: it knows no domain.

Why one base: each loop had its own start, wake and stop, and scaling to several server processes (leases,
heartbeats, taking over a dead process's work) has to be written once, for all of them. A loop says what one
pass does (``one_pass``); the base runs passes on a thread of its own:

- ``start``: only when the interval is positive (0 turns the loop off: tests drive the passes by hand with
  ``run_once``), with a first pass at once for what a previous server left (unless the loop says it has
  nothing urgent at start);
- ``wake``: the next pass now rather than at the end of the wait (a request changed something, once it
  committed);
- ``stop``: the thread ends after its current pass; what the loop watches (workers, processes) is left to it;
- errors: a failing pass is logged and the next one retries, so one bad row never stops the loop;
- the heartbeat (``heartbeat()``): when the last pass completed and when one last failed, with why; what a
  status view reads;
- the lease (``lease=``, ``lanner.db.leases.Lease``): with several server processes on one database, only the
  holder of the loop's lease runs its passes. A second thread per loop takes or renews it every third of the
  lease (so a long pass never lets it lapse); a process that gains it runs a pass at once (``on_lead`` first:
  a loop picks up what the previous leader left), one that loses it stops passing after its current pass, and
  ``stop`` releases it so another takes over within a third of the lease (the keeper's first try is at ``start``:
  a server restarted after a crash takes its dead predecessor's leases at once); ``wake`` in a process that does not
  lead wakes the leader (``lanner.db.wakes``). A loop without one (a process's own request log) runs in every
  process.

A pass driven by hand and one of the thread never overlap (``run_once`` holds the loop's lock); passes driven by
hand ignore the lease (tests, and the CLI, drive them on purpose)."""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class Heartbeat:
    name: str
    started: bool  # its thread runs (False: off, or stopped; passes may still be driven by hand)
    interval: float  # seconds between passes, as read now
    last_pass_at: datetime | None  # when the last pass completed
    last_failure_at: datetime | None  # when the last pass failed
    last_error: str | None  # why it failed (kept after later passes succeed: compare the two times)


class Lease(Protocol):
    """What the base needs of a lease shared by processes (``lanner.db.leases.Lease``)."""

    holder: str

    def hold(self) -> bool: ...  # take or renew: True while this holder has it

    def release(self) -> None: ...

    def wake_leader(self) -> None: ...  # wake the loop in the process holding the lease

    def subscribe(self, wake: Callable[[], None]) -> Callable[[], None]: ...  # returns what unsubscribes

    def renew_every(self) -> float: ...


class BackgroundLoop(ABC):
    def __init__(self, name: str, interval: Callable[[], float], log: logging.Logger, *,
                 first_pass_at_start: bool = True, lease: Lease | None = None, quiet: float = 0.0) -> None:
        """``interval`` is read before every wait, so a test or an operator can change it while it runs.
        ``quiet``: a woken loop waits until it has not been woken for that many seconds (at most one interval)
        before its pass, for a loop that requests wake one by one (a completed upload each) and whose pass would
        compete with the next of those requests: it then runs once after a burst instead of beside it."""
        self.name = name
        self._interval = interval
        self._log = log
        self._first_pass_at_start = first_pass_at_start
        self.lease = lease
        self._quiet = quiet
        self._leading = lease is None  # without a lease every process leads
        self._keeper: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] = lambda: None
        self._took_over = threading.Event()  # the keeper took the lease: the next pass calls on_lead first
        self._wake = threading.Event()
        self._stopping = threading.Event()  # a fresh one per thread: a stopped thread never sees a later start
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()  # start and stop
        self._passing = threading.Lock()  # one pass at a time
        self._last_pass_at: datetime | None = None
        self._last_failure_at: datetime | None = None
        self._last_error: str | None = None

    @abstractmethod
    def one_pass(self) -> Any:
        """The loop's work, once: what it returns, ``run_once`` returns."""

    def interval(self) -> float:
        return self._interval()

    def on_lead(self) -> None:
        """This process just took the loop's lease (a previous leader stopped or died): called before the pass
        that follows at once. A loop that looks for what a dead process left only now and then looks now."""
        return None

    @property
    def leading(self) -> bool:
        """Whether this process runs the loop's passes (always, without a lease)."""
        return self._leading

    @property
    def started(self) -> bool:
        return self._thread is not None

    def run_once(self) -> Any:
        """One pass now, on the caller's thread: errors are raised (the thread logs them), the heartbeat beats."""
        with self._passing:
            try:
                result = self.one_pass()
            except Exception as error:
                self._last_failure_at, self._last_error = datetime.now(UTC), f"{type(error).__name__}: {error}"[:500]
                raise
            self._last_pass_at = datetime.now(UTC)
            return result

    def heartbeat(self) -> Heartbeat:
        return Heartbeat(name=self.name, started=self.started, interval=self.interval(),
                         last_pass_at=self._last_pass_at, last_failure_at=self._last_failure_at,
                         last_error=self._last_error)

    def start(self) -> None:
        if self.interval() <= 0:
            return
        with self._guard:
            if self._thread is None:
                self._stopping = threading.Event()
                self._thread = threading.Thread(target=self._loop, args=(self._stopping,), name=self.name,
                                                daemon=True)
                self._thread.start()
                if self.lease is not None:
                    self._unsubscribe = self.lease.subscribe(self._wake.set)
                    self._keeper = threading.Thread(target=self._keep, args=(self._stopping,),
                                                    name=f"{self.name}-lease", daemon=True)
                    self._keeper.start()
        if self._first_pass_at_start:
            self._wake.set()

    def wake(self) -> None:
        """Run the next pass now instead of at the end of the current wait (nothing when not started), in
        whichever process leads the loop."""
        if not self.started:
            return
        if self.lease is not None and not self._leading:
            try:
                self.lease.wake_leader()
            except Exception:
                self._log.exception("%s: could not wake its leader; it passes at its interval", self.name)
            return
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        with self._guard:
            thread, self._thread = self._thread, None
            keeper, self._keeper = self._keeper, None
            self._stopping.set()
        self._wake.set()
        if thread is not None:
            thread.join(timeout=timeout)
        if keeper is not None:
            keeper.join(timeout=timeout)
            self._unsubscribe()
            self._give_up_lease()

    def _give_up_lease(self) -> None:
        if self.lease is None or not self._leading:
            return
        self._leading = False
        try:
            self.lease.release()
        except Exception:
            self._log.exception("%s could not release its lease; another process takes over when it expires",
                                self.name)

    def _keep(self, stopping: threading.Event) -> None:
        """The lease's thread: take or renew it every third of the lease, whatever the passes are doing."""
        assert self.lease is not None
        while not stopping.is_set():
            try:
                leading = self.lease.hold()
            except Exception:
                self._log.exception("%s could not renew its lease; passes pause until it can", self.name)
                leading = False
            was_leading, self._leading = self._leading, leading
            if leading and not was_leading:
                self._log.info("%s: this process (%s) leads it now", self.name, self.lease.holder)
                self._took_over.set()
                if self._first_pass_at_start:  # what the previous leader left, at once
                    self._wake.set()
            elif was_leading and not leading:
                self._log.warning("%s: lost its lease; another process leads it now", self.name)
            stopping.wait(self.lease.renew_every())

    def _loop(self, stopping: threading.Event) -> None:
        while True:
            if self._wake.wait(self.interval()) and self._quiet > 0:
                self._until_quiet(stopping)
            self._wake.clear()
            if stopping.is_set():
                return
            if not self._leading:
                continue  # another process runs the passes
            if self._took_over.is_set():
                self._took_over.clear()
                try:
                    self.on_lead()
                except Exception:
                    self._log.exception("%s: taking over failed; the next pass retries", self.name)
            try:
                self.run_once()
            except Exception:
                self._log.exception("%s pass failed; the next pass retries", self.name)

    def _until_quiet(self, stopping: threading.Event) -> None:
        """Return once no wake came for ``quiet`` seconds, one interval after the first at the latest."""
        deadline = time.monotonic() + self.interval()
        while not stopping.is_set() and (left := deadline - time.monotonic()) > 0:
            self._wake.clear()
            if not self._wake.wait(min(self._quiet, left)):
                return
