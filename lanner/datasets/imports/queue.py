"""The import queue: runs queued import jobs in worker processes, fairly between users, and finds the jobs whose
server died.

Each pass (every ``LANNER_IMPORT_POLL_SECONDS``, or at once when a request queues a job):

1. reap: a worker that exited without an outcome (killed by the kernel for memory, crashed) fails its job with
   the reason; one running past ``LANNER_IMPORT_TIMEOUT_SECONDS`` is killed and its job failed;
2. recover (the first pass after ``start``, then every ``RECOVER_SECONDS`` worth of passes): a running job whose
   server is gone (same host: its process is dead; any host: no heartbeat for ``HEARTBEAT_STALE_SECONDS``) is
   queued again (``import_jobs.interrupted``); a dataset left ``processing`` with no live job at all is failed.
   Jobs are lost when a server dies, so what counts is the next start; while running, recovery mostly finds the
   jobs of another server on the same database, whose heartbeat takes a minute to go stale anyway, and asking
   on every pass would only load the database;
3. heartbeat: this server's running jobs say they are alive;
4. dispatch: while fewer than ``LANNER_IMPORT_WORKERS`` workers run here, the next job goes to the user with the
   fewest imports running (at most ``LANNER_IMPORT_MAX_PER_USER`` each), oldest first, so one user's uploads
   can never hold up another's. Only the process holding the queue's lease dispatches (``lanner.periodic``),
   the per-user count is read under a lock every process shares, and claiming is a compare-and-set, so several
   servers can share one database;
5. health: a few datasets whose content changed since their stored health report get a fresh one
   (``health.report.refresh_stale``): the datasets' one loop, so a label save never pays for the checks and a
   read never writes them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from sqlalchemy.orm import Session

from lanner.context import AppContext
from lanner.datasets import state
from lanner.datasets.health.report import refresh_stale
from lanner.datasets.imports import jobs as import_jobs
from lanner.datasets.models import ImportJob
from lanner.db import utcnow
from lanner.db.leases import shared_lock
from lanner.periodic import BackgroundLoop

log = logging.getLogger("lanner.datasets.import")

HEARTBEAT_SECONDS = 10.0
HEARTBEAT_STALE_SECONDS = 60.0
RECOVER_SECONDS = 30.0  # between recoveries while running, counted in passes of LANNER_IMPORT_POLL_SECONDS
STRANDED = "the import was interrupted and cannot be resumed; upload the file again"


@dataclass
class _Worker:
    process: subprocess.Popen
    started: float
    name: str  # the job's ``worker``: a job requeued and claimed by someone else is no longer this one's


class ImportQueue(BackgroundLoop):
    """A ``BackgroundLoop`` that, unlike the others, owns its workers: ``stop`` stops them and queues their jobs
    again, and ``wake`` starts it when it is not running (an import must run in an app whose lifespan never
    started it too, such as a test client used without ``with``)."""

    def __init__(self, ctx: AppContext) -> None:
        super().__init__("lanner-imports", lambda: ctx.settings.import_poll_seconds, log,
                         lease=ctx.lease("lanner-imports"))
        self.ctx = ctx
        self.host = socket.gethostname()
        self.instance = secrets.token_hex(4)  # several apps may share one process (tests)
        self._workers: dict[str, _Worker] = {}
        self.worker_command = [sys.executable, "-m", "lanner.datasets.imports.worker"]  # reads its job on stdin
        self._last_heartbeat = 0.0
        self._passes_to_recovery = 0  # the first pass recovers

    def worker_name(self) -> str:
        """``host:server-pid:queue:attempt``: whom a running job belongs to, and which attempt it is."""
        return f"{self.host}:{os.getpid()}:{self.instance}:{secrets.token_hex(4)}"

    def start(self) -> None:
        self._passes_to_recovery = 0  # a queue started again (after stop) recovers on its first pass too
        super().start()  # its first pass at once recovers what a previous server left

    def on_lead(self) -> None:
        """Taking over from another server process: its running jobs are recovered on this first pass."""
        self._passes_to_recovery = 0

    def wake(self) -> None:
        """A job was queued (called once its request committed)."""
        if not self.started:
            self.start()
        super().wake()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop dispatching; the jobs still running here are queued again for the next start (or another
        server), and their workers stop."""
        super().stop(timeout)
        for job_id, worker in list(self._workers.items()):
            worker.process.kill()
            worker.process.wait()
            with self.ctx.db.session() as session:
                job = session.get(ImportJob, job_id)
                if job is not None and job.status == import_jobs.RUNNING and job.worker == worker.name:
                    import_jobs.interrupted(session, job, "the server stopped")
        self._workers.clear()

    def one_pass(self) -> None:
        self._reap()
        if self._passes_to_recovery <= 0:
            self._recover()  # a failure leaves the count at zero: the next pass tries again
            self._passes_to_recovery = recovery_passes(self.ctx.settings.import_poll_seconds)
        self._passes_to_recovery -= 1
        self._heartbeat()
        self._dispatch()
        refresh_stale(self.ctx.db)

    def _reap(self) -> None:
        timeout = self.ctx.settings.import_timeout_seconds
        for job_id, worker in list(self._workers.items()):
            code = worker.process.poll()
            message = None
            if code is None:
                if timeout <= 0 or time.monotonic() - worker.started < timeout:
                    continue
                worker.process.kill()
                worker.process.wait()
                message = (f"the import took longer than {timeout:.0f} s (LANNER_IMPORT_TIMEOUT_SECONDS) and was "
                           "stopped; split the upload into smaller ones")
            else:
                message = _describe_exit(code)
            del self._workers[job_id]
            with self.ctx.db.session() as session:
                job = session.get(ImportJob, job_id)
                if job is not None and job.status == import_jobs.RUNNING and job.worker == worker.name:
                    # the worker ended without an outcome
                    log.warning("import job %s: %s", job_id, message)
                    import_jobs.fail(session, job, message)

    def _recover(self) -> None:
        stale = utcnow() - timedelta(seconds=HEARTBEAT_STALE_SECONDS)
        with self.ctx.db.session() as session:
            for job in import_jobs.live_jobs(session):
                if job.status == import_jobs.RUNNING and self._lost(job, stale):
                    log.warning("import job %s lost its worker (%s); running it again", job.id, job.worker)
                    import_jobs.interrupted(session, job, "its server stopped")
            for dataset in import_jobs.stranded_datasets(session):
                state.fail_import(session, dataset, STRANDED)

    def _lost(self, job: ImportJob, stale: datetime) -> bool:
        host, server, instance, _ = ((job.worker or "") + ":::").split(":", 3)
        if job.id in self._workers:
            return False
        if host == self.host and server.isdigit():
            if int(server) == os.getpid() and instance == self.instance:
                return True  # claimed by this queue, which no longer runs it
            if not _alive(int(server)):
                return True  # its server process is gone
        return job.heartbeat_at is None or job.heartbeat_at < stale

    def _heartbeat(self) -> None:
        if not self._workers or time.monotonic() - self._last_heartbeat < HEARTBEAT_SECONDS:
            return
        self._last_heartbeat = time.monotonic()
        with self.ctx.db.session() as session:
            session.execute(update(ImportJob).where(ImportJob.id.in_(list(self._workers)),
                                                    ImportJob.status == import_jobs.RUNNING)
                            .values(heartbeat_at=utcnow()))

    def _dispatch(self) -> None:
        settings = self.ctx.settings
        while len(self._workers) < settings.import_workers:
            with self.ctx.db.session() as session:
                shared_lock(session, "lanner-imports:dispatch")  # the per-user cap, across every process
                job = self._next_job(session, settings.import_max_per_user)
                if job is None:
                    return
                worker = self.worker_name()
                if not import_jobs.claim(session, job, worker):
                    continue
                job_id = job.id
            self._spawn(job_id, worker)

    def _next_job(self, session: Session, per_user: int) -> ImportJob | None:
        """Round robin between users: of the users under the cap, the one with the fewest imports running
        (anywhere), then the one whose last import started longest ago; that user's oldest queued job."""
        jobs = import_jobs.live_jobs(session)
        running: dict[str, int] = {}
        for job in jobs:
            if job.status == import_jobs.RUNNING:
                running[job.owner_id] = running.get(job.owner_id, 0) + 1
        queued = [job for job in jobs if job.status == import_jobs.QUEUED
                  and (per_user <= 0 or running.get(job.owner_id, 0) < per_user)]
        if not queued:
            return None
        last_start = import_jobs.last_starts(session, {job.owner_id for job in queued})
        never = datetime.min.replace(tzinfo=UTC)
        return min(queued, key=lambda job: (running.get(job.owner_id, 0), last_start.get(job.owner_id) or never,
                                            job.created_at))

    def _spawn(self, job_id: str, worker: str) -> None:
        spec = {"settings": self.ctx.settings.model_dump(mode="json"), "job": job_id, "worker": worker,
                "parent": os.getpid()}
        env = {**os.environ, "MALLOC_ARENA_MAX": "2"}  # per-thread arenas would eat the address-space limit
        try:
            process = subprocess.Popen(self.worker_command, stdin=subprocess.PIPE, env=env, text=True)
            assert process.stdin is not None
            process.stdin.write(json.dumps(spec))
            process.stdin.close()
        except OSError as exc:
            log.error("could not start an import worker: %s", exc)
            with self.ctx.db.session() as session:
                job = session.get(ImportJob, job_id)
                if job is not None:
                    import_jobs.fail(session, job, "the server could not start an import worker; try again later")
            return
        self._workers[job_id] = _Worker(process, time.monotonic(), worker)


def recovery_passes(poll_seconds: float) -> int:
    """Passes between recoveries: ``RECOVER_SECONDS`` of them at the poll interval (a wake makes a pass early,
    so recovery comes sooner then, never later)."""
    return max(1, math.ceil(RECOVER_SECONDS / poll_seconds)) if poll_seconds > 0 else 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _describe_exit(code: int) -> str:
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        return (f"the import worker was stopped by {name}, most often because it used more memory than the "
                "machine or LANNER_IMPORT_MEMORY_BYTES allows; split the upload into smaller ones")
    return f"the import worker stopped unexpectedly (exit code {code}); the server log has the details"

