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
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update

from lanner.config import Settings
from lanner.context import AppContext
from lanner.embeddings import health, index, jobs, maps, vectors
from lanner.embeddings.models import EmbeddingJob
from lanner.embeddings.worker import SPEC_ENV, error_from_log
from lanner.periodic import BackgroundLoop
from lanner.training.executors.base import (
    FINISHED,
    Capability,
    Executor,
    JobState,
    JobStatus,
    LaunchDeferred,
    LaunchSpec,
)
from lanner.training.executors.local import LocalExecutor
from lanner.training.executors.ray import RayExecutor
from lanner.training.executors.watch import LAUNCHING, JobWatch

log = logging.getLogger("lanner.embeddings")
LINK_TTL_SECONDS = 7 * 24 * 3600  # a job's signed links outlive any attempt (the token dies with the attempt)


def make_embedding_executor(settings: Settings) -> Executor:
    """The same kind of executor as training and exports, with its own slots and folders."""
    if settings.executor == "ray" and settings.ray_address:
        return RayExecutor(settings.ray_address, num_gpus=settings.ray_num_gpus,
                           worker_dir=f"{settings.ray_worker_dir.rstrip('/')}/embeddings")
    return LocalExecutor(settings.resolved_home / "embeddings" / "jobs", max_cpu_runs=settings.embedding_workers)


class EmbeddingQueue(BackgroundLoop):
    """``wake`` when a request queued or cancelled a job (once it committed); ``stop`` leaves workers running."""

    def __init__(self, ctx: AppContext, executor: Executor | None = None) -> None:
        super().__init__("lanner-embeddings", lambda: ctx.settings.embedding_poll_seconds, log,
                         lease=ctx.lease("lanner-embeddings"))
        self.ctx = ctx
        self._executor = executor
        self.jobs = JobWatch(ctx.db, EmbeddingJob, what="embedding job", log=log)

    @property
    def executor(self) -> Executor:
        if self._executor is None:
            self._executor = make_embedding_executor(self.ctx.settings)
        return self._executor

    def one_pass(self) -> None:
        self.jobs.poll(self.executor, observe=self._observe, release_stale=lambda job_id, _: self._release(job_id))
        self.dispatch()
        maps.build_pending(self.ctx)

    def dispatch(self) -> None:
        with self.ctx.db.session() as session:
            queued = list(session.scalars(select(EmbeddingJob.id).where(
                EmbeddingJob.status == jobs.QUEUED, EmbeddingJob.external_id.is_(None))
                .order_by(EmbeddingJob.created_at)))
            busy = session.scalar(select(func.count()).where(EmbeddingJob.external_id.is_not(None))) or 0
        if not queued:
            return
        room = len(queued)
        if not self.executor.can(Capability.QUEUES_JOBS):  # workers launched by any process are counted here
            slots = self.executor.capacity().get("cpu")
            room = (slots.total if slots else self.ctx.settings.embedding_workers) - busy
        for job_id in queued[:max(room, 0)]:
            self._launch(job_id)

    def _launch(self, job_id: str) -> None:
        with self.ctx.db.session() as session:
            if not self.jobs.claim(session, job_id, EmbeddingJob.status == jobs.QUEUED):
                return
            job = session.get(EmbeddingJob, job_id)
            assert job is not None
            session.refresh(job)
            jobs.new_attempt(job)
            spec = self._spec(job)
        try:
            external_id = self.executor.launch(spec)
        except LaunchDeferred as exc:
            log.warning("embedding job %s waits: the executor cannot take it yet (%s)", job_id, exc)
            self._release(job_id)
            return
        except Exception as exc:
            log.exception("could not launch embedding job %s", job_id)
            with self.ctx.db.session() as session:
                job = session.get(EmbeddingJob, job_id)
                if job is not None:
                    jobs.fail(session, job, f"the {self.executor.name} executor could not start the embedding "
                                            f"worker ({type(exc).__name__}); the server log has the details")
                    job.external_id = None
            return
        with self.ctx.db.session() as session:
            job = session.get(EmbeddingJob, job_id)
            if job is None:
                self.executor.stop(external_id)
                return
            if not jobs.launched(session, job, external_id=external_id, executor=self.executor.name):
                job.external_id = external_id  # cancelled meanwhile: the next watch stops the worker
            elif not self.executor.can(Capability.QUEUES_JOBS):
                jobs.running(session, job)

    def _spec(self, job: EmbeddingJob) -> LaunchSpec:
        settings, signer, slot = self.ctx.settings, self.ctx.signer, job.slot or ""
        spec = {"jobId": job.id, "attempt": job.attempt, "imgsz": job.imgsz, "batch": settings.embedding_batch,
                "weightsUrl": signer.download_url(job.model_sha256, "weights.pt", LINK_TTL_SECONDS),
                "weightsSha256": job.model_sha256,
                "manifestUrl": signer.sign("GET", jobs.worker_path(job.id, slot, "manifest"), LINK_TTL_SECONDS),
                "vectorsUrl": signer.sign("PUT", jobs.worker_path(job.id, slot, "vectors"), LINK_TTL_SECONDS)}
        home = settings.resolved_home
        folder = home / "embeddings" / "jobs" / job.id
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(folder),
               "LANNER_HOME": str(home), "YOLO_CONFIG_DIR": str(folder / "config"), "YOLO_OFFLINE": "1",
               "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "2", SPEC_ENV: json.dumps(spec)}
        if os.environ.get("PYTHONPATH"):  # the server's own import path (a source checkout) is the worker's too
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env = self.executor.worker_env(env, run_id=job.id)
        return LaunchSpec(run_id=job.id, attempt=job.attempt, gpu_type="cpu", workdir=str(folder),
                          command=[settings.worker_python or sys.executable, "-m", "lanner.embeddings.worker"],
                          env=env)

    def _release(self, job_id: str) -> None:
        with self.ctx.db.session() as session:
            session.execute(update(EmbeddingJob).where(EmbeddingJob.id == job_id,
                                                       EmbeddingJob.external_id.startswith(LAUNCHING))
                            .values(external_id=None, attempt=EmbeddingJob.attempt - 1, slot=None)
                            .execution_options(synchronize_session=False))

    def _observe(self, session: Any, job: EmbeddingJob, status: JobStatus) -> None:
        if status.state in FINISHED:
            if job.status in jobs.LAUNCHED:
                self._finished(session, job, status)
            job.external_id = None
            return
        if job.status not in jobs.ACTIVE:
            log.info("embedding job %s is %s: stopping its worker", job.id, job.status)
            self.executor.stop(job.external_id or "")
            return
        if status.state is JobState.RUNNING and job.status == jobs.STARTING:
            jobs.running(session, job)

    def _finished(self, session: Any, job: EmbeddingJob, status: JobStatus) -> None:
        tail = self._log_tail(job)
        message = error_from_log(tail)
        if message is None and status.state is JobState.SUCCEEDED:
            vectors.count_progress(session, job)
            if jobs.complete(session, job):
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
            return
        if message is None and status.state in (JobState.LOST, JobState.EXPIRED, JobState.STOPPED):
            log.warning("embedding job %s: worker lost (%s)", job.id, status.message)
            jobs.lost(session, job, status.message or "worker lost")
            return
        if message is None:
            last = "\n".join(tail.splitlines()[-6:])[-1500:]
            message = f"the embedding worker stopped ({status.message or status.state.value})" + (
                f": {last}" if last else "")
        jobs.fail(session, job, message)

    def _log_tail(self, job: EmbeddingJob) -> str:
        try:
            return self.executor.log_tail(job.external_id or "", lines=40)
        except Exception:
            return ""
