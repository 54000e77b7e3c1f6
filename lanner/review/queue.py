"""The review scores queue: ``WorkerJobQueue`` running the auto-annotation worker (``autolabel.worker``: fetch
the weights, predict chunk by chunk, post each chunk's boxes and confidences) for scores jobs. The spec is the
auto-annotation spec with this domain's chunk URL and token, so a worker lost mid-dataset is relaunched for the
images not yet scored, as an auto-annotation run is."""

from __future__ import annotations

import logging
from typing import Any

from lanner.autolabel import worker
from lanner.autolabel.queue import LINK_TTL_SECONDS, AutolabelQueue, image_links
from lanner.context import AppContext
from lanner.datasets.models import Dataset
from lanner.review import jobs, service
from lanner.review.models import ReviewJob
from lanner.training.executors.base import Executor, JobStatus
from lanner.training.executors.job_queue import WorkerJobQueue, worker_executor

log = logging.getLogger("lanner.review")
TOKEN_PURPOSE = "review-chunk"
NMS_IOU = 0.7


def chunk_token(signer: Any, job: ReviewJob) -> str:
    return str(signer.sign_value(TOKEN_PURPOSE, f"{job.id}:{job.slot}"))


def read_token(signer: Any, token: str | None) -> tuple[str, str] | None:
    """(job id, attempt slot) of a worker's token, or None for a forged one."""
    value = signer.unsign_value(TOKEN_PURPOSE, token)
    job_id, sep, slot = (value or "").partition(":")
    return (job_id, slot) if sep and job_id and slot else None


class ReviewQueue(WorkerJobQueue):
    table = ReviewJob
    states = jobs
    what, worker_name = "review scores job", "review scores worker"
    folder, worker_module, spec_env = "review", "lanner.autolabel.worker", worker.SPEC_ENV
    error_mark = worker.ERROR_MARK

    def __init__(self, ctx: AppContext, executor: Executor | None = None) -> None:
        super().__init__(ctx, executor, name="lanner-review", interval=lambda: ctx.settings.review_poll_seconds,
                         log=log)

    def make_executor(self) -> Executor:
        return worker_executor(self.ctx.settings, "review", cpu_runs=self.ctx.settings.export_workers, num_gpus=0)

    slots = AutolabelQueue.slots  # the same worker: any free slot, CPU or GPU

    def payload(self, session: Any, job: ReviewJob) -> dict[str, Any]:
        settings, signer, ttl = self.ctx.settings, self.ctx.signer, LINK_TTL_SECONDS
        images, gone = image_links(session, signer, job.dataset_id, service.remaining_keys(session, job))
        if gone:  # images deleted since: scored as having nothing
            service.record_chunk(session, self.ctx, job, [{"key": k} for k in gone])
        return {"jobId": job.id, "attempt": job.attempt, "confidence": job.confidence, "iou": NMS_IOU,
                "imgsz": job.imgsz, "classMap": job.class_map, "chunk": settings.autolabel_chunk_images,
                "weightsUrl": signer.download_url(job.model_sha256, "weights.pt", ttl),
                "weightsSha256": job.model_sha256,
                "images": images,
                "chunkUrl": f"{signer.public_url.rstrip('/')}/api/review/chunks", "token": chunk_token(signer, job)}

    def _finished(self, session: Any, job: ReviewJob, status: JobStatus, missing: str | None = None) -> None:
        """The worker is gone and the job is not complete: its error fails it, else the rest runs again."""
        message = self.error_from_log(self._log_tail(job))
        if job.processed >= job.total:
            dataset = session.get(Dataset, job.dataset_id)
            if dataset is not None:
                service.finish(session, self.ctx, job, dataset)
            return
        if message is not None:
            jobs.fail(session, job, message)
            return
        log.warning("review scores %s: worker ended at %d/%d images (%s)", job.id, job.processed, job.total,
                    status.message or status.state.value)
        jobs.lost(session, job, status.message or status.state.value)
