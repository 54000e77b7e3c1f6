"""The auto-annotation queue: one background loop (leased, so one server process of several runs it) that runs
each run's worker through an executor, the same interface and the same watch as exports (``exports.queue``):

1. watch: every run with a worker that may be alive is polled. A worker that runs makes its run ``running``; one
   that exited with an error fails its run; one that was lost (killed, its node died) or exited before the last
   image was recorded puts the run back in the queue (``jobs.lost``), and the next attempt labels only the images
   not yet recorded (``service.remaining_keys``); a cancelled run's worker is stopped.
2. dispatch: queued runs are claimed (a compare-and-set) and launched while the executor has room.

The worker needs no database: its spec holds signed links to the weights and each image, and the URL and token
with which it hands back each chunk's labels (``router.record_chunk``)."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select

from lanner.autolabel import jobs, service, worker
from lanner.autolabel.models import AutolabelJob
from lanner.context import AppContext
from lanner.datasets.models import Dataset, DatasetItem
from lanner.training.executors.base import Executor, JobStatus
from lanner.training.executors.job_queue import WorkerJobQueue, worker_executor

log = logging.getLogger("lanner.autolabel")
TOKEN_PURPOSE = "autolabel-chunk"
LINK_TTL_SECONDS = 7 * 24 * 3600  # a run's signed links outlive any attempt (the token dies with the attempt)


def chunk_token(signer: Any, job: AutolabelJob) -> str:
    return str(signer.sign_value(TOKEN_PURPOSE, f"{job.id}:{job.slot}"))


def read_token(signer: Any, token: str | None) -> tuple[str, str] | None:
    """(run id, attempt slot) of a worker's token, or None for a forged one."""
    value = signer.unsign_value(TOKEN_PURPOSE, token)
    job_id, sep, slot = (value or "").partition(":")
    return (job_id, slot) if sep and job_id and slot else None


def image_links(session: Any, signer: Any, dataset_id: str, keys: list[str]) -> tuple[list[dict[str, str]], list[str]]:
    """A worker's signed links to the images ``keys`` of a dataset, in ``keys``' order, and the keys of those
    deleted since (or of a dataset gone): what auto-annotation and the review scores both hand their worker."""
    dataset = session.get(Dataset, dataset_id)
    rows = {key: digest for key, digest in session.execute(select(DatasetItem.key, DatasetItem.sha256).where(
        DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.key.in_(keys)))} if dataset else {}
    return ([{"key": k, "url": signer.download_url(rows[k], "image", LINK_TTL_SECONDS)} for k in keys if k in rows],
            [k for k in keys if k not in rows])


class AutolabelQueue(WorkerJobQueue):
    """Auto-annotation runs on ``WorkerJobQueue``: its own spec (each image's signed link and the chunk URL) and
    its own judgement of a finished worker (the chunks it handed back complete the run)."""

    table = AutolabelJob
    states = jobs
    what, worker_name = "auto-annotation", "auto-annotation worker"
    folder, worker_module, spec_env = "autolabel", "lanner.autolabel.worker", worker.SPEC_ENV
    error_mark = worker.ERROR_MARK  # the export worker's

    def __init__(self, ctx: AppContext, executor: Executor | None = None) -> None:
        super().__init__(ctx, executor, name="lanner-autolabel", interval=lambda: ctx.settings.autolabel_poll_seconds,
                         log=log)

    def make_executor(self) -> Executor:
        return worker_executor(self.ctx.settings, "autolabel", cpu_runs=self.ctx.settings.export_workers, num_gpus=0)

    def slots(self) -> dict[str, int]:
        """Every slot the executor has, CPU or GPU: a run predicts on the CPU, and takes any free one."""
        return {"cpu": sum(room.total for room in self.executor.capacity().values())}

    def payload(self, session: Any, job: AutolabelJob) -> dict[str, Any]:
        settings, signer, ttl = self.ctx.settings, self.ctx.signer, LINK_TTL_SECONDS
        keys = service.remaining_keys(session, job)
        images, gone = image_links(session, self.ctx.signer, job.dataset_id, keys)
        spec = {"jobId": job.id, "attempt": job.attempt, "operation": job.operation, "confidence": job.confidence,
                "iou": job.iou, "imgsz": job.imgsz, "classMap": job.class_map, "chunk": settings.autolabel_chunk_images,
                **({"cascade": str(settings.face_cascade) if settings.face_cascade else None}
                   if job.operation == "blur" else
                   {"weightsUrl": signer.download_url(job.weights_sha256 or "", "weights.pt", ttl),
                    "weightsSha256": job.weights_sha256}),
                "images": images,
                "chunkUrl": f"{signer.public_url.rstrip('/')}/api/autolabel/chunks", "token": chunk_token(signer, job)}
        if gone:  # images deleted since: recorded as done with nothing added
            service.record_chunk(session, self.ctx, job, [{"key": k} for k in gone])
        return spec

    def _finished(self, session: Any, job: AutolabelJob, status: JobStatus, missing: str | None = None) -> None:
        """The worker is gone and the run is not complete: its error fails it; otherwise (killed, lost, or gone
        before the last chunk) the rest runs again."""
        message = self.error_from_log(self._log_tail(job))
        if job.processed >= job.total:  # every image left was recorded (or deleted meanwhile)
            jobs.complete(session, job, service.summary(job))
            return
        if message is not None:
            jobs.fail(session, job, message)
            return
        log.warning("auto-annotation %s: worker ended at %d/%d images (%s)", job.id, job.processed, job.total,
                    status.message or status.state.value)
        jobs.lost(session, job, status.message or status.state.value)
