"""The maintenance thread: work nobody asks for but everybody relies on.

Every ``LANNER_MAINTENANCE_INTERVAL_SECONDS`` it forgets superseded training checkpoints and deletes the blobs
nothing refers to any more (``gc.collect_checkpoints``), permanently deletes datasets whose days in the trash
are over (the trash's ``daysRemaining`` is a promise) with the bytes they alone used, deletes expired web
sessions (a browser that never comes back would otherwise leave its row forever), sweeps a sixteenth of the
blob store for anything else nobody refers to (``gc.sweep``), and registers official models new or changed in
``LANNER_OFFICIAL_MODELS_DIR``. Each job runs in its own transaction and a
failure is logged and retried on the next pass, so one broken job never stops the others.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lanner.accounts.sessions import delete_expired_sessions
from lanner.context import AppContext
from lanner.datasets.trash import purge_expired
from lanner.maintenance.gc import (
    SHARDS,
    SHARDS_PER_PASS,
    Collected,
    Swept,
    collect_checkpoints,
    sweep,
)
from lanner.periodic import BackgroundLoop
from lanner.projects.official import OfficialFolder
from lanner.storage.references import delete_unreferenced

log = logging.getLogger("lanner.maintenance")


@dataclass(frozen=True)
class Pass:
    checkpoints: Collected | None
    purged_datasets: int | None
    swept: Swept | None = None
    expired_sessions: int | None = None
    official_models: list[str] | None = None


class Maintenance(BackgroundLoop):
    """Its first pass comes one interval after the start, not at once: nothing here is urgent, ``lanner serve``
    registers the official models itself before its workers start, and a server restarted in a loop (or several
    workers starting together) would otherwise sweep the blob store on every start."""

    def __init__(self, ctx: AppContext) -> None:
        super().__init__("lanner-maintenance", lambda: ctx.settings.maintenance_interval_seconds, log,
                         first_pass_at_start=False, lease=ctx.lease("lanner-maintenance"))
        self.ctx = ctx
        self._next_shard = 0
        self.official = OfficialFolder(ctx.settings.official_models_dir)

    def one_pass(self) -> Pass:
        checkpoints = purged = swept = None
        ctx = self.ctx
        try:
            checkpoints = collect_checkpoints(self.ctx.db, self.ctx.blobs, self.ctx.settings.checkpoint_grace_seconds)
        except Exception:
            log.exception("checkpoint collection failed; the next pass retries")
        try:
            with ctx.db.session() as session:
                purged, released = purge_expired(session)
            if purged:
                log.info("purged %d datasets whose time in the trash was over", purged)
                delete_unreferenced(ctx.db, ctx.blobs, released, ctx.settings.blob_grace_seconds)
        except Exception:
            log.exception("trash purge failed; the next pass retries")
        try:
            shards = SHARDS[self._next_shard:self._next_shard + SHARDS_PER_PASS]
            self._next_shard = (self._next_shard + SHARDS_PER_PASS) % len(SHARDS)
            swept = sweep(ctx.db, ctx.blobs, ctx.settings, shards)
        except Exception:
            log.exception("the collector's sweep failed; the next pass retries")
        try:
            with self.ctx.db.session() as session:
                sessions = delete_expired_sessions(session)
        except Exception:
            sessions = None
            log.exception("deleting expired web sessions failed; the next pass retries")
        try:
            official = self.official.sync(ctx.db, ctx.blobs)
        except Exception:
            official = None
            log.exception("registering official models failed; the next pass retries")
        return Pass(checkpoints=checkpoints, purged_datasets=purged, swept=swept, expired_sessions=sessions,
                    official_models=official)
