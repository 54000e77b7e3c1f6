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

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import select, update

from lanner.autolabel import jobs, service
from lanner.autolabel.models import AutolabelJob
from lanner.autolabel.worker import SPEC_ENV
from lanner.context import AppContext
from lanner.datasets.models import Dataset, DatasetItem
from lanner.exports.worker import error_from_log
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

log = logging.getLogger("lanner.autolabel")
TOKEN_PURPOSE = "autolabel-chunk"


def chunk_token(signer: Any, job: AutolabelJob) -> str:
    return str(signer.sign_value(TOKEN_PURPOSE, f"{job.id}:{job.slot}"))


def read_token(signer: Any, token: str | None) -> tuple[str, str] | None:
    """(run id, attempt slot) of a worker's token, or None for a forged one."""
    value = signer.unsign_value(TOKEN_PURPOSE, token)
    job_id, sep, slot = (value or "").partition(":")
    return (job_id, slot) if sep and job_id and slot else None


class AutolabelQueue(BackgroundLoop):
    """``wake`` when a request queued or cancelled a run (once it committed); ``stop`` leaves workers running."""

    def __init__(self, ctx: AppContext, executor: Executor | None = None) -> None:
        super().__init__("lanner-autolabel", lambda: ctx.settings.autolabel_poll_seconds, log,
                         lease=ctx.lease("lanner-autolabel"))
        self.ctx = ctx
        self._executor = executor
        self.jobs = JobWatch(ctx.db, AutolabelJob, what="auto-annotation", log=log)

    @property
    def executor(self) -> Executor:
        if self._executor is None:
            settings = self.ctx.settings
            if settings.executor == "ray" and settings.ray_address:
                self._executor = RayExecutor(settings.ray_address, num_gpus=0,
                                             worker_dir=f"{settings.ray_worker_dir.rstrip('/')}/autolabel")
            else:
                self._executor = LocalExecutor(settings.resolved_home / "autolabel",
                                               max_cpu_runs=settings.export_workers)
        return self._executor

    def one_pass(self) -> None:
        self.watch()
        self.dispatch()

    def dispatch(self) -> None:
        with self.ctx.db.session() as session:
            queued = list(session.scalars(select(AutolabelJob.id).where(
                AutolabelJob.status == jobs.QUEUED, AutolabelJob.external_id.is_(None))
                .order_by(AutolabelJob.created_at)))
        if not queued:
            return
        room = None
        if not self.executor.can(Capability.QUEUES_JOBS):
            room = sum(r.total for r in self.executor.capacity().values())
            with self.ctx.db.session() as session:
                room -= len(list(session.scalars(select(AutolabelJob.id).where(AutolabelJob.external_id.is_not(None)))))
        for job_id in queued:
            if room is not None:
                if room <= 0:
                    return
                room -= 1
            self._launch(job_id)

    def _launch(self, job_id: str) -> None:
        with self.ctx.db.session() as session:
            if not self.jobs.claim(session, job_id, AutolabelJob.status == jobs.QUEUED):
                return
            job = session.get(AutolabelJob, job_id)
            assert job is not None
            session.refresh(job)
            jobs.new_attempt(job)
            spec = self._spec(session, job)
        try:
            external_id = self.executor.launch(spec)
        except LaunchDeferred as exc:
            log.warning("auto-annotation %s waits: %s", job_id, exc)
            self._release(job_id)
            return
        except Exception as exc:
            log.exception("could not launch auto-annotation %s", job_id)
            with self.ctx.db.session() as session:
                job = session.get(AutolabelJob, job_id)
                if job is not None:
                    jobs.fail(session, job, f"the {self.executor.name} executor could not start the worker "
                                            f"({type(exc).__name__})")
                    job.external_id = None
            return
        with self.ctx.db.session() as session:
            job = session.get(AutolabelJob, job_id)
            if job is None:
                self.executor.stop(external_id)
                return
            if not jobs.launched(session, job, external_id=external_id, executor=self.executor.name):
                job.external_id = external_id  # cancelled meanwhile: watch stops the worker
            elif not self.executor.can(Capability.QUEUES_JOBS):
                jobs.running(session, job)

    def _spec(self, session: Any, job: AutolabelJob) -> LaunchSpec:
        settings, signer = self.ctx.settings, self.ctx.signer
        ttl = 7 * 24 * 3600
        keys = service.remaining_keys(session, job)
        dataset = session.get(Dataset, job.dataset_id)
        rows = {key: digest for key, digest in session.execute(select(DatasetItem.key, DatasetItem.sha256).where(
            DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.key.in_(keys)))} if dataset else {}
        spec = {"jobId": job.id, "attempt": job.attempt, "confidence": job.confidence, "iou": job.iou,
                "imgsz": job.imgsz, "classMap": job.class_map, "chunk": settings.autolabel_chunk_images,
                "weightsUrl": signer.download_url(job.weights_sha256 or "", "weights.pt", ttl),
                "weightsSha256": job.weights_sha256,
                "images": [{"key": k, "url": signer.download_url(rows[k], "image", ttl)} for k in keys if k in rows],
                "chunkUrl": f"{signer.public_url.rstrip('/')}/api/autolabel/chunks", "token": chunk_token(signer, job)}
        if len(spec["images"]) < len(keys):  # images deleted since: recorded as done with nothing added
            service.record_chunk(session, job, [{"key": k, "labels": []} for k in keys if k not in rows])
        home = settings.resolved_home
        folder = home / "autolabel" / job.id
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(folder),
               "LANNER_HOME": str(home), "YOLO_CONFIG_DIR": str(folder / "config"), "YOLO_OFFLINE": "1",
               "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "2", SPEC_ENV: json.dumps(spec)}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env = self.executor.worker_env(env, run_id=job.id)
        return LaunchSpec(run_id=job.id, attempt=job.attempt, gpu_type="cpu",
                          command=[settings.worker_python or sys.executable, "-m", "lanner.autolabel.worker"],
                          env=env, workdir=str(folder))

    def _release(self, job_id: str) -> None:
        with self.ctx.db.session() as session:
            session.execute(update(AutolabelJob).where(AutolabelJob.id == job_id,
                                                       AutolabelJob.external_id.startswith(LAUNCHING))
                            .values(external_id=None, attempt=AutolabelJob.attempt - 1, slot=None)
                            .execution_options(synchronize_session=False))

    def watch(self) -> None:
        self.jobs.poll(self.executor, observe=self._observe, release_stale=lambda job_id, _claim: self._release(job_id))

    def _observe(self, session: Any, job: AutolabelJob, status: JobStatus) -> None:
        if status.state in FINISHED:
            if job.status in jobs.LAUNCHED:
                self._finished(session, job, status)
            job.external_id = None
            return
        if job.status not in jobs.ACTIVE:
            log.info("auto-annotation %s is %s: stopping its worker", job.id, job.status)
            self.executor.stop(job.external_id or "")
            return
        if status.state is JobState.RUNNING and job.status == jobs.STARTING:
            jobs.running(session, job)

    def _finished(self, session: Any, job: AutolabelJob, status: JobStatus) -> None:
        """The worker is gone and the run is not complete: its error fails it; otherwise (killed, lost, or gone
        before the last chunk) the rest runs again."""
        try:
            tail = self.executor.log_tail(job.external_id or "", lines=40)
        except Exception:
            tail = ""
        message = error_from_log(tail)
        if job.processed >= job.total:  # every image left was recorded (or deleted meanwhile)
            jobs.complete(session, job, f"{job.processed} images, {job.annotations} labels added")
            return
        if message is not None:
            jobs.fail(session, job, message)
            return
        log.warning("auto-annotation %s: worker ended at %d/%d images (%s)", job.id, job.processed, job.total,
                    status.message or status.state.value)
        jobs.lost(session, job, status.message or status.state.value)
