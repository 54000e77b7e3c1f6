"""The maintenance thread: work nobody asks for but everybody relies on.

Every ``LANNER_MAINTENANCE_INTERVAL_SECONDS`` it forgets superseded training checkpoints and deletes the blobs
nothing refers to any more (``gc.collect_checkpoints``), permanently deletes datasets whose days in the trash
are over (the trash's ``daysRemaining`` is a promise) and deletes expired web sessions (a browser that never
comes back would otherwise leave its row forever). Each job runs in its own transaction and a failure is
logged and retried on the next pass, so one broken job never stops the others.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lanner.accounts.sessions import delete_expired_sessions
from lanner.context import AppContext
from lanner.datasets.trash import purge_expired
from lanner.maintenance.gc import Collected, collect_checkpoints
from lanner.periodic import PeriodicThread

log = logging.getLogger("lanner.maintenance")


@dataclass(frozen=True)
class Pass:
    checkpoints: Collected | None
    purged_datasets: int | None
    expired_sessions: int | None = None


class Maintenance:
    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self._thread = PeriodicThread("lanner-maintenance", self.run_once,
                                      lambda: ctx.settings.maintenance_interval_seconds, log)

    def run_once(self) -> Pass:
        checkpoints = purged = None
        try:
            checkpoints = collect_checkpoints(self.ctx.db, self.ctx.blobs, self.ctx.settings.checkpoint_grace_seconds)
        except Exception:
            log.exception("checkpoint collection failed; the next pass retries")
        try:
            with self.ctx.db.session() as session:
                purged = purge_expired(session)
            if purged:
                log.info("purged %d datasets whose time in the trash was over", purged)
        except Exception:
            log.exception("trash purge failed; the next pass retries")
        try:
            with self.ctx.db.session() as session:
                sessions = delete_expired_sessions(session)
        except Exception:
            sessions = None
            log.exception("deleting expired web sessions failed; the next pass retries")
        return Pass(checkpoints=checkpoints, purged_datasets=purged, expired_sessions=sessions)

    def start(self) -> None:
        if self.ctx.settings.maintenance_interval_seconds > 0:
            self._thread.start()

    def stop(self) -> None:
        self._thread.stop()
