"""The export queue: one background loop per server process that runs export jobs through an executor (the
same interface as training: a local subprocess by default, a Ray Job on a cluster), so an export never blocks
the API and survives the server.

Each pass (every ``LANNER_EXPORT_POLL_SECONDS``, or at once when a request queues or cancels one):

1. watch: every job with a worker that may be alive is polled. A worker that runs makes its job ``running``; one
   that exited without delivering fails its job with the error it printed; one that was lost (killed, its node
   died, gone after a server restart) runs the job again (``jobs.lost``); one running past
   ``LANNER_EXPORT_TIMEOUT_SECONDS`` is killed and its job failed; a cancelled or failed job's worker is stopped.
   With a store that presigns (a bucket), the worker PUT its artefact straight into the bucket's staging area,
   never through an API host: once it is gone, its slot is settled (read back, hashed, stored by digest) after
   the poll's transaction and recorded as an arrival on Lanner's route is (``jobs.record_artefact``); nothing
   there fails the job as a worker that delivered nothing does.
2. dispatch: queued jobs are claimed (a compare-and-set, so several server processes can share one database)
   and launched while the executor has room (an executor that queues jobs itself, Ray, gets them all).

A server killed mid-export loses nothing: local workers run in their own session and are recognised again
after a restart by pid and start time (``LocalExecutor``); a worker that finished while no server listened has
its upload retried for a while, else it is lost and the job runs again (with a bucket, its upload does not need
the server, and is settled when the restarted server sees the worker gone).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from lanner.billing.metering import elapsed_seconds
from lanner.context import AppContext
from lanner.db import utcnow
from lanner.exports import jobs, worker
from lanner.exports.formats import FORMATS
from lanner.exports.models import ModelExport
from lanner.projects.models import ModelRecord
from lanner.storage.blobs import BlobTooLarge, StoredBlob
from lanner.storage.signing import URLSigner
from lanner.training.executors.base import FINISHED, Executor, JobState, JobStatus
from lanner.training.executors.job_queue import STOP_GRACE_SECONDS, WorkerJobQueue, worker_executor

log = logging.getLogger("lanner.exports")


def export_device(job: ModelExport) -> str:
    """The GPU only where the artefact depends on it (a TensorRT engine, FP16 weights); anything else exports on
    the CPU, so it also works on a node whose GPU this process cannot see."""
    needs_gpu = FORMATS[job.format].gpu or (job.args or {}).get("quantize") == 16
    return "0" if needs_gpu and job.gpu_type != "cpu" else "cpu"


class ExportQueue(WorkerJobQueue):
    """Exports on ``WorkerJobQueue``, plus what only an export has: a GPU type per job, a timeout, a stop grace
    for a worker still wrapping up after its upload completed the job, and the presigned settle path."""

    table = ModelExport
    states = jobs
    what, worker_name = "export", "export worker"
    folder, worker_module, spec_env = "exports", "lanner.exports.worker", worker.SPEC_ENV
    error_mark = worker.ERROR_MARK
    extra_env = {"PIP_NO_INDEX": "1",  # MNN runs `pip install` via os.system on import: let it fail, change nothing
                 "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    def __init__(self, ctx: AppContext, executor: Executor | None = None) -> None:
        super().__init__(ctx, executor, name="lanner-exports", interval=lambda: ctx.settings.export_poll_seconds,
                         log=log)
        self._ended: dict[str, float] = {}  # job -> when its worker was first seen alive after the job ended
        self._to_settle: list[tuple[str, str, JobStatus]] = []  # (job, external id, status) of this watch

    def make_executor(self) -> Executor:
        return worker_executor(self.ctx.settings, "exports", cpu_runs=self.ctx.settings.export_workers)

    def gpu_type(self, job: ModelExport) -> str:
        return job.gpu_type

    def gpu_column(self) -> Any:
        return ModelExport.gpu_type

    def payload(self, session: Any, job: ModelExport) -> dict[str, Any]:
        signer: URLSigner = self.ctx.signer
        model = session.get(ModelRecord, job.model_id)
        ttl = int(max(self.ctx.settings.export_timeout_seconds, 3600) + 3600)  # Ray may hold the job before it runs
        return {"exportId": job.id, "attempt": job.attempt, "format": job.format, "args": job.args or {},
                "device": export_device(job), "stem": model.slug if model else "model",
                "filename": job.filename, "weightsUrl": signer.download_url(job.source_sha256 or "", "weights.pt", ttl),
                "weightsSha256": job.source_sha256,
                "uploadUrl": signer.worker_upload_url(jobs.slot_key(job), ttl)[0]}

    def succeeded(self, session: Any, job: ModelExport) -> str | None:
        return "the export worker finished without delivering a file"  # its upload would have completed it

    # --- watch -----------------------------------------------------------------------------------

    def watch(self) -> None:
        """Every job with a worker that may be alive: a pass that died between its claim and the launch gives
        the job back (``_release``); the others are observed, or judged without a status (``_unreadable``)."""
        self._to_settle = []
        self.jobs.poll(self.executor, observe=self._observe, release_stale=lambda job_id, _claim: self._release(job_id),
                       unreadable=self._unreadable)
        for job_id, external_id, status in self._to_settle:
            self._settle(job_id, external_id, status)

    def _unreadable(self, job_id: str, external_id: str, since: datetime) -> None:
        """The executor cannot say how the worker is: Ray forgot the job, or a local worker runs on another host
        (the lease moved, ``WorkerElsewhere``). The export itself still can: a file on its presigned slot
        completes it (the upload is atomic: a staged object is a whole one); an export that ended (its upload
        completed it, or it was cancelled) lets go of the worker after the stop grace, or its slot would stay
        taken for ever; one still running fails past its timeout. Otherwise the next pass asks again."""
        with self.ctx.db.read_session() as session:
            job = session.get(ModelExport, job_id)
            if job is None or job.external_id != external_id:
                return
            status, started_at, key = job.status, job.started_at, jobs.slot_key(job)
        now = utcnow()
        if status in jobs.LAUNCHED and self.ctx.blobs.presigns and self.ctx.blobs.stat_staged(key) is not None:
            self._settle(job_id, external_id, JobStatus(JobState.SUCCEEDED))
        elif status not in jobs.ACTIVE and elapsed_seconds(since, now) > STOP_GRACE_SECONDS:
            self._let_go(job_id, external_id, None)
        elif status in jobs.ACTIVE and started_at and 0 < self.ctx.settings.export_timeout_seconds < elapsed_seconds(
                started_at, now):
            self._let_go(job_id, external_id, f"the export took longer than "
                         f"{self.ctx.settings.export_timeout_seconds:.0f} s (LANNER_EXPORT_TIMEOUT_SECONDS), and its "
                         "worker's state could not be read")
        else:
            return
        self.jobs.forget(job_id)

    def _let_go(self, job_id: str, external_id: str, failure: str | None) -> None:
        super()._let_go(job_id, external_id, failure)
        self._ended.pop(job_id, None)

    def _observe(self, session: Any, job: ModelExport, status: JobStatus) -> None:
        if status.state in FINISHED:
            if job.status in jobs.LAUNCHED and self.ctx.blobs.presigns:
                self._to_settle.append((job.id, job.external_id or "", status))
                return  # after this transaction: reading the artefact back must not hold the database
            if job.status in jobs.LAUNCHED:
                self._finished(session, job, status)
            job.external_id = None
            self._ended.pop(job.id, None)
            return
        if job.status not in jobs.ACTIVE:  # cancelled, failed, or completed and still wrapping up
            first = self._ended.setdefault(job.id, time.monotonic())
            if job.status != jobs.COMPLETED or time.monotonic() - first > STOP_GRACE_SECONDS:
                log.info("export %s is %s: stopping its worker", job.id, job.status)
                self.executor.stop(job.external_id or "")
            return
        if status.state is JobState.RUNNING and job.status == jobs.STARTING:
            jobs.running(session, job)
        timeout = self.ctx.settings.export_timeout_seconds
        if timeout > 0 and job.started_at and elapsed_seconds(job.started_at, utcnow()) > timeout:
            self.executor.kill(job.external_id or "")
            jobs.fail(session, job, f"the export took longer than {timeout:.0f} s (LANNER_EXPORT_TIMEOUT_SECONDS) "
                                    "and was stopped")

    def _settle(self, job_id: str, external_id: str, status: JobStatus) -> None:
        """The worker of ``job_id`` is gone and it had a presigned PUT into the bucket: what it PUT there, read
        back and hashed (the worker's word is never taken), completes the job, whatever the executor says of the
        worker (one adopted after a restart has no exit code; one whose node died after its upload is as good as
        finished). Nothing there (or the slot's limit exceeded) and the job ends as ``_finished`` says. A bucket
        that cannot be read leaves the job as it is: the next pass settles it."""
        with self.ctx.db.read_session() as session:
            job = session.get(ModelExport, job_id)
            if job is None or job.external_id != external_id or job.status not in jobs.LAUNCHED:
                return
            key = jobs.slot_key(job)
        staged: StoredBlob | None = None
        refused = None
        try:
            staged = self.ctx.blobs.settle_staged(key, self.ctx.settings.max_upload_bytes)
        except BlobTooLarge as exc:
            refused = f"the exported file was refused: {exc}"
        except Exception:
            log.exception("export %s: could not read its upload back from the bucket; trying again", job_id)
            return
        with self.ctx.db.session() as session:
            job = session.get(ModelExport, job_id)
            if job is None or job.external_id != external_id:
                return  # deleted meanwhile: the settled bytes are the collector's
            if job.status in jobs.LAUNCHED:
                if staged is not None:
                    jobs.record_artefact(session, key, sha256=staged.sha256, size=staged.size)
                elif refused is not None:
                    jobs.fail(session, job, refused)
                else:
                    self._finished(session, job, status, missing="the export worker finished, but its file is not "
                                   "in the bucket: nothing was uploaded on its presigned upload URL")
            job.external_id = None
            self._ended.pop(job_id, None)
        if staged is not None:
            self.ctx.blobs.drop_staged(key)  # filed by digest and recorded: the staged copy has served
