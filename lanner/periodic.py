"""A background thread that runs one job every few seconds until stopped: the supervisor and the maintenance
loop are both this. A failing pass is logged and the next one retries, so one bad row never stops the loop."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


class PeriodicThread:
    def __init__(self, name: str, job: Callable[[], object], interval: Callable[[], float],
                 log: logging.Logger) -> None:
        """``interval`` is read before every wait, so a test or an operator can change it while it runs."""
        self.name = name
        self._job = job
        self._interval = interval
        self._log = log
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def interval(self) -> float:
        return self._interval()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """Run the next pass now instead of at the end of the current wait."""
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None

    def _loop(self) -> None:
        while True:
            self._wake.wait(self._interval())
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._job()
            except Exception:
                self._log.exception("%s pass failed; the next pass retries", self.name)


class BackgroundLoop:
    """``start``/``wake``/``stop`` for a service whose passes a ``PeriodicThread`` (``self._thread``) runs: started
    only when its interval is positive (0 turns the loop off, as tests do to drive passes by hand), with a first
    pass at once for what a previous server left; woken when a request changed something; stopped without
    touching the workers it watches (the next start finds them again)."""

    _thread: PeriodicThread

    def start(self) -> None:
        if self._thread.interval() > 0:
            self._thread.start()
            self._thread.wake()

    def wake(self) -> None:
        if self._thread.running:
            self._thread.wake()

    def stop(self) -> None:
        self._thread.stop()
