"""Waking a background loop in whichever process leads it: PostgreSQL ``LISTEN``/``NOTIFY`` on one channel.

A request that queues work wakes its loop (``BackgroundLoop.wake``) so the work starts now, not at the end of the
loop's wait. With several server processes the loop runs in the holder of its lease, most often another process:
``publish(name)`` sends ``NOTIFY lanner_wake, name`` (delivered when its transaction commits, to every process
listening on the database), and each process's one listener thread wakes its loops of that name; the leader
passes, the others see they do not lead and wait again. On SQLite (one process) there is nobody to tell: the
base wakes its own loop, as before. A lost notification costs only latency: the leader passes at its interval
anyway."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import text

from lanner.db import Database

log = logging.getLogger("lanner.db.wakes")
CHANNEL = "lanner_wake"
_listeners: dict[str, _Listener] = {}  # one per database URL in this process
_guard = threading.Lock()


def publish(db: Database, name: str) -> None:
    """Wake the loop ``name`` wherever it leads (PostgreSQL; nothing elsewhere)."""
    if db.engine.dialect.name != "postgresql":
        return
    with db.engine.begin() as connection:
        connection.execute(text("SELECT pg_notify(:channel, :name)"), {"channel": CHANNEL, "name": name})


def subscribe(db: Database, name: str, wake: Callable[[], None]) -> Callable[[], None]:
    """Call ``wake`` whenever any process publishes ``name``; returns what unsubscribes (the listener's
    connection closes with its last subscriber). Nothing on SQLite."""
    if db.engine.dialect.name != "postgresql":
        return lambda: None
    url = db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with _guard:
        listener = _listeners.get(url)
        if listener is None:
            listener = _listeners[url] = _Listener(url)
        listener.callbacks.setdefault(name, []).append(wake)

    def unsubscribe() -> None:
        with _guard:
            callbacks = listener.callbacks.get(name, [])
            if wake in callbacks:
                callbacks.remove(wake)
            if not any(listener.callbacks.values()):
                listener.stopping.set()
                _listeners.pop(url, None)

    return unsubscribe


class _Listener:
    """A thread with its own connection in autocommit, listening; reconnects after an error (a restarted
    database), waking every loop then, since notifications sent meanwhile were lost."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.callbacks: dict[str, list[Callable[[], None]]] = {}
        self.stopping = threading.Event()
        self.listening = threading.Event()
        threading.Thread(target=self._run, name="lanner-wakes", daemon=True).start()
        self.listening.wait(10.0)  # a wake sent once ``subscribe`` returned is heard (unless the database is down)

    def _run(self) -> None:
        import psycopg  # here: only a server on PostgreSQL needs the driver itself

        while not self.stopping.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    while not self.stopping.is_set():
                        for notify in connection.notifies(timeout=1.0):
                            self._wake(notify.payload)
            except Exception:
                log.exception("the wake listener lost its connection; reconnecting")
                self._wake(None)
                self.stopping.wait(1.0)

    def _wake(self, name: str | None) -> None:
        with _guard:
            callbacks = [c for n, cs in self.callbacks.items() if name in (None, n) for c in cs]
        for callback in callbacks:
            callback()
