"""The loop that runs one kind of job through a worker process on the training executors (a local subprocess by
default, a Ray Job on a cluster): exports, auto-annotation and embeddings all do, so one base does what they
share and each domain says only what is its own (``WorkerJobQueue``'s hooks).

Why one: the three launched, released, watched and judged their workers by the same lines, and a fix to one
(a claim given back when the executor defers, a worker stopped once its job ended) had to be made three times.
What is shared: the executor (its own folder and slots per domain), dispatch while the executor has room (the
database counts the workers any server process launched), the launch (claim → next attempt → spec → executor →
``starting``; a deferred launch gives the claim back, a failed one fails the job), the clean worker environment,
and the default watch: a finished worker is judged by ``_finished`` (the error it printed, else lost, else the
domain's ``succeeded``), a running one makes its job ``running``, an ended job's worker is stopped.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import literal, select, update

from lanner.config import Settings
from lanner.context import AppContext
from lanner.db import utcnow
from lanner.periodic import BackgroundLoop
from lanner.training.executors import worker_io
from lanner.training.executors.base import (
    FINISHED,
    Capability,
    Executor,
    JobState,
    JobStatus,
    LaunchDeferred,
    LaunchSpec,
)
from lanner.training.executors.job_states import ACTIVE, LAUNCHED, QUEUED, STARTING
from lanner.training.executors.local import LocalExecutor
from lanner.training.executors.ray import RayExecutor
from lanner.training.executors.watch import LAUNCHING, JobWatch

GONE = (JobState.LOST, JobState.EXPIRED, JobState.STOPPED)  # the worker vanished without an outcome
STOP_GRACE_SECONDS = 60.0  # an ended job's worker still running (or unreadable) this long is stopped


def worker_executor(settings: Settings, folder: str, *, cpu_runs: int, num_gpus: float | None = None) -> Executor:
    """The same kind of executor as training, with the domain's own folder (``home/<folder>`` here, its top
    folder under the Ray worker directory) and slots."""
    if settings.executor == "ray" and settings.ray_address:
        return RayExecutor(settings.ray_address, num_gpus=settings.ray_num_gpus if num_gpus is None else num_gpus,
                           worker_dir=f"{settings.ray_worker_dir.rstrip('/')}/{folder.split('/')[0]}")
    return LocalExecutor(settings.resolved_home / folder, max_cpu_runs=cpu_runs)


class WorkerJobQueue(BackgroundLoop):
    """``wake`` when a request queued or cancelled a job (once it committed); ``stop`` leaves workers running.

    A domain sets ``table`` (its jobs' model: ``id``, ``status``, ``external_id``, ``attempt``, ``slot``,
    ``created_at``), ``states`` (its ``jobs`` module), ``what`` (the job, for messages), ``folder``,
    ``worker_module``, ``error_mark`` (its worker's), and fills ``make_executor`` and ``payload``."""

    table: Any
    states: Any
    what: str  # "export", "embedding job": for the log and the user's messages
    worker_name: str  # "export worker": what the user is told could not start or stopped
    folder: str  # the executor's and each job's folder under the home: "exports", "embeddings/jobs"
    worker_module: str  # python -m this
    spec_env: str  # the worker's spec variable
    error_mark: str  # what its worker prints before the JSON of its failure (``worker_io.main``)
    extra_env: dict[str, str] = {}

    def __init__(self, ctx: AppContext, executor: Executor | None, *, name: str,
                 interval: Callable[[], float], log: logging.Logger) -> None:
        super().__init__(name, interval, log, lease=ctx.lease(name))
        self.ctx = ctx
        self.log = log
        self._executor = executor
        self.jobs = JobWatch(ctx.db, self.table, what=self.what, log=log)

    # --- what each domain says --------------------------------------------------------------------

    def make_executor(self) -> Executor:
        raise NotImplementedError

    def payload(self, session: Any, job: Any) -> dict[str, Any]:
        """The worker's spec (signed links, settings): JSON in ``spec_env``."""
        raise NotImplementedError

    def gpu_type(self, job: Any) -> str:
        return "cpu"

    def gpu_column(self) -> Any:
        """The column (an SQL expression) of the GPU type a job asks for: a constant where every job is a CPU one."""
        return literal("cpu")

    def succeeded(self, session: Any, job: Any) -> str | None:
        """The worker exited 0 and printed no error: what fails the job (None: it completed here)."""
        raise NotImplementedError

    def slots(self) -> dict[str, int]:
        """Slots per GPU type of an executor that does not queue jobs itself."""
        return {gpu: room.total for gpu, room in self.executor.capacity().items()}

    # --- the loop ---------------------------------------------------------------------------------

    @property
    def executor(self) -> Executor:
        if self._executor is None:
            self._executor = self.make_executor()
        return self._executor

    def one_pass(self) -> None:
        self.watch()
        self.dispatch()

    def dispatch(self) -> None:
        table = self.table
        gpu = self.gpu_column()
        with self.ctx.db.session() as session:
            queued = list(session.execute(select(table.id, gpu).where(
                table.status == QUEUED, table.external_id.is_(None)).order_by(table.created_at)))
        if not queued:
            return
        capacity = None if self.executor.can(Capability.QUEUES_JOBS) else self._free_slots(gpu)
        for job_id, gpu_type in queued:
            if capacity is not None:
                if capacity.get(gpu_type, 0) <= 0:
                    continue
                capacity[gpu_type] -= 1
            self._launch(job_id)

    def _free_slots(self, gpu: Any) -> dict[str, int]:
        """Free slots per GPU type: the executor's count, never more than the database allows (workers launched
        before a restart, or by another server process, are known only there)."""
        slots = self.slots()
        with self.ctx.db.session() as session:
            for gpu_type in session.scalars(select(gpu).select_from(self.table)
                                            .where(self.table.external_id.is_not(None))):
                slots[gpu_type] = slots.get(gpu_type, 0) - 1
        return slots

    def _launch(self, job_id: Any) -> None:
        with self.ctx.db.session() as session:
            if not self.jobs.claim(session, job_id, self.table.status == QUEUED):
                return
            job = session.get(self.table, job_id)
            assert job is not None
            session.refresh(job)
            self.states.new_attempt(job)
            spec = self._spec(session, job)
        try:
            external_id = self.executor.launch(spec)
        except LaunchDeferred as exc:
            self.log.warning("%s %s waits: the executor cannot take it yet (%s)", self.what, job_id, exc)
            self._release(job_id)
            return
        except Exception as exc:
            self.log.exception("could not launch %s %s", self.what, job_id)
            with self.ctx.db.session() as session:
                job = session.get(self.table, job_id)
                if job is not None:
                    self.states.fail(session, job, f"the {self.executor.name} executor could not start the "
                                     f"{self.worker_name} ({type(exc).__name__}); the server log has the details")
                    job.external_id = None
            return
        with self.ctx.db.session() as session:
            job = session.get(self.table, job_id)
            if job is None:
                self.executor.stop(external_id)
                return
            if not self.states.launched(session, job, external_id=external_id, executor=self.executor.name):
                job.external_id = external_id  # cancelled meanwhile: the next watch stops the worker
            elif not self.executor.can(Capability.QUEUES_JOBS):
                self.states.running(session, job)

    def _spec(self, session: Any, job: Any) -> LaunchSpec:
        """The launch: the domain's payload in a clean environment (the venv's ``bin`` first, no downloads by
        YOLO, the server's import path where it runs from a checkout), in the job's own folder."""
        settings = self.ctx.settings
        payload = self.payload(session, job)
        home = settings.resolved_home
        folder = home / self.folder / str(job.id)
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(folder),
               "LANNER_HOME": str(home), "YOLO_CONFIG_DIR": str(folder / "config"), "YOLO_OFFLINE": "1",
               "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "2", **self.extra_env,
               self.spec_env: json.dumps(payload)}
        if os.environ.get("PYTHONPATH"):  # the server's own import path (a source checkout) is the worker's too
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env = self.executor.worker_env(env, run_id=job.id)
        return LaunchSpec(run_id=job.id, attempt=job.attempt, gpu_type=self.gpu_type(job), workdir=str(folder),
                          command=[settings.worker_python or sys.executable, "-m", self.worker_module], env=env)

    def _release(self, job_id: Any) -> None:
        """Give back a claim whose launch did not happen: the job is queued again as it was."""
        table = self.table
        with self.ctx.db.session() as session:
            session.execute(update(table).where(table.id == job_id, table.external_id.startswith(LAUNCHING))
                            .values(external_id=None, attempt=table.attempt - 1, slot=None)
                            .execution_options(synchronize_session=False))

    # --- watch ------------------------------------------------------------------------------------

    def watch(self) -> None:
        self.jobs.poll(self.executor, observe=self._observe, release_stale=lambda job_id, _: self._release(job_id),
                       unreadable=self._unreadable)

    def _unreadable(self, job_id: Any, external_id: str, since: datetime) -> None:
        """The executor cannot say how the worker is: Ray forgot the job, or a local worker runs on another host
        (the lease moved, ``WorkerElsewhere``). A job that ended (its deliveries completed it, or it was
        cancelled) lets go of the worker after the stop grace: its slot would otherwise stay taken for ever. A
        job still active is asked about again at the next pass: its worker may be delivering from that host."""
        with self.ctx.db.read_session() as session:
            job = session.get(self.table, job_id)
            if job is None or job.external_id != external_id:
                return
            status = job.status
        if status in ACTIVE or (utcnow() - since).total_seconds() <= STOP_GRACE_SECONDS:
            return
        self._let_go(job_id, external_id, None)
        self.jobs.forget(job_id)

    def _let_go(self, job_id: Any, external_id: str, failure: str | None) -> None:
        """Stop a worker whose state cannot be read (as far as this executor can reach it), fail its job with
        ``failure`` if one is given, and free its slot."""
        try:
            self.executor.stop(external_id)
        except Exception:  # it cannot be read; it may not be reachable either
            self.log.warning("%s %s: could not stop its worker %s", self.what, job_id, external_id, exc_info=True)
        with self.ctx.db.session() as session:
            job = session.get(self.table, job_id)
            if job is None or job.external_id != external_id:
                return
            if failure is not None:
                self.states.fail(session, job, failure)
            job.external_id = None

    def _observe(self, session: Any, job: Any, status: JobStatus) -> None:
        if status.state in FINISHED:
            if job.status in LAUNCHED:
                self._finished(session, job, status)
            job.external_id = None
            return
        if job.status not in ACTIVE:
            self.log.info("%s %s is %s: stopping its worker", self.what, job.id, job.status)
            self.executor.stop(job.external_id or "")
            return
        if status.state is JobState.RUNNING and job.status == STARTING:
            self.states.running(session, job)

    def _finished(self, session: Any, job: Any, status: JobStatus, missing: str | None = None) -> None:
        """The worker is gone and its job did not end otherwise. An error it printed is the job's reason, whatever
        the executor says (a worker adopted after a restart has no exit code); a worker that vanished runs the
        job again; one that exited 0 is the domain's to judge (``succeeded``, or ``missing``)."""
        tail = self._log_tail(job)
        message = self.error_from_log(tail)
        if message is None and status.state in GONE:
            self.log.warning("%s %s: worker lost (%s)", self.what, job.id, status.message)
            self.states.lost(session, job, status.message or "worker lost")
            return
        if message is None and status.state is JobState.SUCCEEDED:
            message = missing or self.succeeded(session, job)
            if message is None:
                return
        if message is None:
            last = "\n".join(tail.splitlines()[-6:])[-1500:]
            message = f"the {self.worker_name} stopped ({status.message or status.state.value})" + (
                f": {last}" if last else "")
        self.states.fail(session, job, message)

    def error_from_log(self, tail: str) -> str | None:
        return worker_io.error_from_log(tail, self.error_mark)

    def _log_tail(self, job: Any) -> str:
        try:
            return self.executor.log_tail(job.external_id or "", lines=40)
        except Exception:
            return ""
