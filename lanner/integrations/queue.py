"""The bucket import queue: a ``BackgroundLoop`` that claims queued bucket imports (compare-and-set, so two
processes never run one job) and runs them one after another on its thread; woken when a job is queued."""

from __future__ import annotations

import logging

from lanner.context import AppContext
from lanner.integrations import jobs
from lanner.integrations.importer import Import
from lanner.periodic import BackgroundLoop

log = logging.getLogger(__name__)


class BucketImports(BackgroundLoop):
    def __init__(self, ctx: AppContext) -> None:
        super().__init__("lanner-bucket-imports", lambda: ctx.settings.import_poll_seconds, log,
                         lease=ctx.lease("lanner-bucket-imports"))  # one process imports at a time, as uploads
        self.ctx = ctx

    def one_pass(self) -> int:
        """Run every queued job; returns how many ran."""
        ran = 0
        with self.ctx.db.session() as session:
            jobs.requeue_stale(session)
        while True:
            with self.ctx.db.session() as session:
                job = jobs.next_queued(session)
                job_id = job.id if job else None
            if job_id is None:
                return ran
            Import(self.ctx.db, self.ctx.blobs, self.ctx.settings, job_id).run()
            ran += 1
