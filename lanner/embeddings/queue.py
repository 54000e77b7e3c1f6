"""The embedding queue: one background loop per server process (under a lease, so one of several processes runs
it) that runs embedding jobs through the training executor interface, as the export queue runs exports (a local
subprocess by default, a Ray Job on a cluster). Each pass:

1. watch: every job with a worker that may be alive is polled. A running worker makes its job ``running``; one
   that exited 0 completes it (the manifest had nothing left) and builds the dataset's index and map (the 2-D
   layout, ``embeddings.maps``: about a minute at 100,000 images, on this loop's thread); one that failed
   fails it with the error it printed; one that was lost (killed, its node died) queues the job again, whose next
   attempt embeds only the images still missing; a cancelled job's worker is stopped.
2. dispatch: queued jobs are claimed (a compare-and-set) and launched while the executor has room.
3. maps that ``datasets.clustering`` asked for (an analysis older than its map) are computed.
4. stale indexes: a dataset whose images changed since its similar-images index was built (an image removed,
   replaced, added) gets a new one (``index.build_stale``; requests answer from the old one meanwhile, without
   the images that are gone).
"""

from __future__ import annotations

import logging
from typing import Any

from lanner.context import AppContext
from lanner.embeddings import health, index, jobs, maps, vectors, worker
from lanner.embeddings.models import EmbeddingJob
from lanner.projects.models import ModelRecord
from lanner.training.executors.base import Executor
from lanner.training.executors.job_queue import WorkerJobQueue, worker_executor

log = logging.getLogger("lanner.embeddings")
LINK_TTL_SECONDS = 7 * 24 * 3600  # a job's signed links outlive any attempt (the token dies with the attempt)


class EmbeddingQueue(WorkerJobQueue):
    """Embedding jobs on ``WorkerJobQueue``: their spec (the signed manifest and vectors links), and what a worker
    that exited 0 leaves to do (the job completes; the dataset's index, findings and map are built)."""

    table = EmbeddingJob
    states = jobs
    what, worker_name = "embedding job", "embedding worker"
    folder, worker_module, spec_env = "embeddings/jobs", "lanner.embeddings.worker", worker.SPEC_ENV
    error_mark = worker.ERROR_MARK

    def __init__(self, ctx: AppContext, executor: Executor | None = None) -> None:
        super().__init__(ctx, executor, name="lanner-embeddings",
                         interval=lambda: ctx.settings.embedding_poll_seconds, log=log)

    def make_executor(self) -> Executor:
        return worker_executor(self.ctx.settings, "embeddings/jobs", cpu_runs=self.ctx.settings.embedding_workers)

    def one_pass(self) -> None:
        super().one_pass()
        maps.build_pending(self.ctx)
        index.build_stale(self.ctx)

    def slots(self) -> dict[str, int]:
        slots = self.executor.capacity().get("cpu")
        return {"cpu": slots.total if slots else self.ctx.settings.embedding_workers}

    def payload(self, session: Any, job: EmbeddingJob) -> dict[str, Any]:
        """The worker's spec. ``job.model_sha256`` names the weights and the encoding (``encoding.vector_key``);
        the weights are the job's model's, and the worker checks that they and its encoding give that key. The
        sample and head links ask it to train the key's copy-detection head, which the key lacks."""
        settings, signer, slot = self.ctx.settings, self.ctx.signer, job.slot or ""
        model = session.get(ModelRecord, job.model_id) if job.model_id else None
        weights = (model.weights_sha256 if model is not None else None) or ""
        spec = {"jobId": job.id, "attempt": job.attempt, "imgsz": job.imgsz, "batch": settings.embedding_batch,
                "weightsUrl": signer.download_url(weights, "weights.pt", LINK_TTL_SECONDS),
                "weightsSha256": weights, "vectorKey": job.model_sha256,
                "manifestUrl": signer.sign("GET", jobs.worker_path(job.id, slot, "manifest"), LINK_TTL_SECONDS),
                "vectorsUrl": signer.sign("PUT", jobs.worker_path(job.id, slot, "vectors"), LINK_TTL_SECONDS)}
        if vectors.wants_head(session, job, settings.embedding_head_min_images):
            spec["sampleUrl"] = signer.sign("GET", jobs.worker_path(job.id, slot, "sample"), LINK_TTL_SECONDS)
            spec["headUrl"] = signer.sign("PUT", jobs.worker_path(job.id, slot, "head"), LINK_TTL_SECONDS)
        return spec

    def succeeded(self, session: Any, job: EmbeddingJob) -> str | None:
        """The worker found no image left without a vector: the job completes, and the dataset's index, findings
        and map are built now, so that the first query and the page find them."""
        vectors.count_progress(session, job)
        if not jobs.complete(session, job):
            return None
        session.commit()  # before the index is built: the job is done whatever happens to the build
        try:
            index.warm(self.ctx, job.dataset_id, job.model_sha256)  # the first query finds it built
            health.warm(self.ctx, job.dataset_id, job.model_sha256)  # and the page its findings
        except Exception:  # a query builds it then
            log.exception("embedding job %s: the dataset's index could not be built now", job.id)
        try:
            maps.build(self.ctx, job.dataset_id, job.model_sha256)  # a layout's failure is kept on its row
        except Exception:  # the database's: the job stays completed, a clustering request asks again
            log.exception("embedding job %s: the dataset's map could not be stored", job.id)
        return None
