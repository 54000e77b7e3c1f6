"""The supervisor: one background loop that moves Lanner-launched runs along (dstack's pattern: state lives in
the database, each pass reads it, acts, and writes it back through guarded transitions).

Each pass, in order:
1. dispatch: launch pending runs where the executor has room (one that queues jobs itself gets them all);
2. watch: poll every launched attempt; a worker that was killed, whose node died, or that stopped reporting
   for ``run_lost_after_seconds`` makes the run ``lost``, and it is relaunched with ``resume`` (up to
   ``run_max_relaunches`` times); a worker that exited by itself without a result fails the run;
   a cancelled run's worker gets ``cancel_grace_seconds`` to stop, then is killed;
3. meter and 4. settle: charge running and ended runs (``charging.py``);
5. learn: about once a minute, running runs refresh their calibration points (``learn.py``).

Every step is idempotent (guarded transitions, cumulative charges, ledger idempotency keys), so a pass that
dies half-way, or two servers running passes at once, cannot double-charge or skip a state. Two rarely do: with
several server processes on one database only the holder of the supervisor's lease runs passes
(``lanner.periodic``), so one process dispatches, and one meters each run (one charge writer per run); free
slots are counted under a lock all processes share all the same (``slots.room``). Where executors
differ, the supervisor asks the executor (its capabilities, its ``worker_env``), never which one it is.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lanner.billing.metering import elapsed_seconds
from lanner.context import AppContext
from lanner.db import iso, utcnow
from lanner.gpus.catalogue import get_catalogue
from lanner.gpus.pools import Pools
from lanner.periodic import BackgroundLoop
from lanner.projects.models import ModelRecord
from lanner.training import pool_usage, slots
from lanner.training.charging import Charging
from lanner.training.checkpoints import resume_checkpoint_url
from lanner.training.executors import Capability, Executor, JobState, LaunchDeferred, LaunchSpec
from lanner.training.executors.watch import LAUNCHING, JobWatch
from lanner.training.keys import issue_run_key, revoke_run_key
from lanner.training.learn import learn_from_running
from lanner.training.models import Run
from lanner.training.provisioning import fall_back, has_a_device, pool_order, record_wait, wait_for_node
from lanner.training.state import WAITING, RunStatus, try_transition
from lanner.training.worker import SPEC_ENV, trainer_device

log = logging.getLogger("lanner.supervisor")
EXIT_GRACE_SECONDS = 15.0  # events still in flight after a worker exits (the final upload, training_complete)
LEARN_EVERY_SECONDS = 60.0
KILL_AFTER_GRACE_SECONDS = 60.0  # a finished run's worker still running this long after its stop is killed


class Supervisor(BackgroundLoop):
    """A ``BackgroundLoop`` every ``LANNER_SUPERVISOR_INTERVAL_SECONDS``; ``stop`` leaves workers running (the
    next start finds them again)."""

    def __init__(self, ctx: AppContext, executor: Executor) -> None:
        super().__init__("lanner-supervisor", lambda: ctx.settings.supervisor_interval_seconds, log,
                         lease=ctx.lease("lanner-supervisor"))
        self.ctx = ctx
        self.executor = executor
        self.settings = ctx.settings
        self.catalogue = get_catalogue(ctx.settings)
        self.charging = Charging(ctx, self.catalogue)
        self.jobs = JobWatch(ctx.db, Run, what="run", log=log)
        self._exits: dict[int, datetime] = {}  # run -> when its worker was first seen gone
        self._learned_at = float("-inf")  # monotonic time of the last refresh of running runs' calibration
        self._free: dict[str, Any] | None = None  # this pass's free devices per type, read when first needed

    @property
    def pools(self) -> Pools:
        return self.executor.pools  # read again when the operator edits the file

    def one_pass(self) -> None:
        self._free = None
        self.watch()  # first: after a restart, workers still running are seen before any slot counts as free
        self.dispatch()
        self.charging.meter()
        self.charging.settle()
        self.learn()
        pool_usage.record(self.ctx.db, self.pools, self._free_devices)  # node-hours per pool, for the operator

    # --- dispatch --------------------------------------------------------------------------------

    def dispatch(self) -> None:
        with self.ctx.db.session() as session:
            pending = list(session.scalars(select(Run.id).where(
                Run.executor.is_not(None), Run.status == RunStatus.PENDING.value, Run.external_id.is_(None))
                .order_by(Run.id)))
        if not pending:
            return
        # An executor that queues jobs itself is handed every pending run, except what a pool at its largest
        # cannot hold (those wait here, launched fairly); otherwise Lanner counts free slots.
        queues = self.executor.can(Capability.QUEUES_JOBS)
        capacity = None if queues else slots.capacity(self.ctx.db, self.executor)
        pools = self.pools if queues else Pools()
        pool_room: dict[str, int] = {}
        if len(pools):
            with self.ctx.db.session() as session:
                pool_room, pending = pool_order(session, pools, pending, self._free_devices(), self.executor.name)
        for run_id in pending:
            with self.ctx.db.session() as session:
                run = session.get(Run, run_id)
                if run is None or run.status != RunStatus.PENDING or run.external_id is not None:
                    continue
                gpu_type = run.gpu_type or "cpu"
                if capacity is not None and slots.room(session, self.executor, capacity, gpu_type) < run.gpu_count:
                    continue
                if gpu_type in pool_room:
                    if pool_room[gpu_type] < run.gpu_count:
                        continue  # its pool is at its largest: it waits for a run to end
                    pool_room[gpu_type] -= run.gpu_count
                if not self.jobs.claim(session, run_id):  # another server process launches it
                    continue
                spec = self._prepare(session, run)
            try:
                external_id = self.executor.launch(spec)
            except LaunchDeferred as exc:
                log.warning("run %s waits: the executor cannot take it yet (%s)", run_id, exc)
                self._release_claim(run_id, unlaunched=True)
                continue
            except Exception as exc:
                log.exception("could not launch run %s", run_id)
                self._fail(run_id, f"the {self.executor.name} executor could not start the worker "
                                   f"({type(exc).__name__}); the server log has the details", code="launch_failed")
                continue
            with self.ctx.db.session() as session:
                run = session.get(Run, run_id)
                assert run is not None
                run.external_id = external_id
                run.worker_exited_at = None
                if not self.executor.can(Capability.QUEUES_JOBS):  # running now: its clock starts at launch
                    self._begin_attempt(session, run)
                elif gpu_type in pool_room:  # queued: for a node its pool brings up, unless one is free
                    self._provisioning(session, run, utcnow())
            if capacity is not None:
                room = capacity[gpu_type]
                capacity[gpu_type] = type(room)(total=room.total, free=room.free - 1)

    def _free_devices(self) -> dict[str, Any]:
        """The executor's devices per type, read once per pass (on Ray: one request to the dashboard)."""
        if self._free is None:
            self._free = dict(self.executor.capacity())
        return self._free

    def _prepare(self, session: Session, run: Run) -> LaunchSpec:
        """A fresh run-scoped key per attempt (the previous one is revoked) and the worker's whole environment."""
        run.attempt += 1
        plaintext = issue_run_key(session, run, key_cache=self.ctx.key_cache)
        launch = dict(run.launch or {})
        spec = {"runId": run.id, "modelId": run.model_id, "attempt": run.attempt, "resume": run.attempt > 1,
                "trainArgs": launch.get("trainArgs") or run.train_args or {}, "project": launch["project"],
                "name": launch["name"], "device": "cpu" if run.gpu_type == "cpu" else trainer_device(run.gpu_count),
                "checkpointUrl": resume_checkpoint_url(session, run, self.ctx.signer),
                "checkpointEverySeconds": self.settings.checkpoint_upload_seconds}
        home = self.settings.resolved_home
        workdir = str(home / "runs" / str(run.id) / "work")
        env = {
            "PATH": f"{_bin_dir()}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home / "runs" / str(run.id)),
            "YOLO_CONFIG_DIR": str(home / "runs" / str(run.id) / "config"),
            "ULTRALYTICS_PLATFORM_URL": self.settings.public_url.rstrip("/"),
            "ULTRALYTICS_API_KEY": plaintext,
            "MPLBACKEND": "Agg",
            "PYTHONUNBUFFERED": "1",
            "YOLO_OFFLINE": "1",  # no font, weight or analytics downloads: a worker reaches only Lanner
            SPEC_ENV: json.dumps(spec),
        }
        if os.environ.get("PYTHONPATH"):  # the server's own import path (a source checkout): the worker is its code
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env = self.executor.worker_env(env, run_id=run.id)
        python = self.settings.worker_python or sys.executable
        return LaunchSpec(run_id=run.id, attempt=run.attempt, gpu_type=run.gpu_type or "cpu", gpu_count=run.gpu_count,
                          command=[python, "-m", "lanner.training.worker"], env=env, workdir=workdir)

    def _revoke_key(self, session: Session, run: Run) -> None:
        revoke_run_key(session, run, key_cache=self.ctx.key_cache)

    def _begin_attempt(self, session: Session, run: Run) -> None:
        if try_transition(session, run, RunStatus.STARTING, reason=f"attempt {run.attempt} launched"):
            run.attempt_started_at = utcnow()
            run.last_event_at = None

    # --- watch -----------------------------------------------------------------------------------

    def watch(self) -> None:
        """Every attempt whose worker may be alive: a pass that died between its claim and the launch gives the
        run back to dispatch (``_release_claim``); the others are observed, or checked for silence."""
        self.jobs.poll(self.executor, where=(Run.executor.is_not(None), Run.worker_exited_at.is_(None)),
                       observe=self._observe, release_stale=self._release_claim, unreadable=self._check_silence)

    def _check_silence(self, run_id: int, external_id: str, unreadable_since: datetime) -> None:
        """The executor cannot say how the worker is (e.g. Ray forgot the job after a head restart): the run's
        own events still can. A running run silent for too long is lost, or it would be metered forever; a
        queued one unreadable that long is submitted again; a finished one's worker, unreadable past its grace,
        is stopped blind and its key revoked, or the key would stay valid for ever."""
        with self.ctx.db.session() as session:
            run = session.get(Run, run_id)
            if run is None or run.external_id != external_id:
                return
            now = utcnow()
            if run.status in (RunStatus.STARTING, RunStatus.RUNNING):
                heard = max(filter(None, [run.last_event_at, run.attempt_started_at]), default=None)
                if elapsed_seconds(heard, now) > self.settings.run_lost_after_seconds:
                    self._kill(run)
                    self._lost(session, run, f"no event for {int(elapsed_seconds(heard, now))} s and no job status")
                    self.jobs.forget(run_id)
            elif run.status in WAITING:
                if elapsed_seconds(unreadable_since, now) > self.settings.run_lost_after_seconds:
                    self._kill(run)
                    self._lost(session, run, "its queued job's status could not be read")
                    self.jobs.forget(run_id)
            elif RunStatus(run.status).is_terminal():
                grace = max(self._grace(run), KILL_AFTER_GRACE_SECONDS)
                if elapsed_seconds(max(unreadable_since, run.completed_at or unreadable_since), now) > grace:
                    self._kill(run)
                    run.worker_exited_at = now
                    self._revoke_key(session, run)
                    self.jobs.forget(run_id)

    def _release_claim(self, run_id: int, external_id: str | None = None, *, unlaunched: bool = False) -> None:
        """Give a claimed run back to dispatch (only the claim ``external_id``, when given). ``unlaunched``: the
        executor refused it, so the attempt it was prepared as never happened and is not counted (a run's
        second attempt resumes from a checkpoint the first would have written)."""
        with self.ctx.db.session() as session:
            claim = Run.external_id == external_id if external_id else Run.external_id.startswith(LAUNCHING)
            values: dict[str, Any] = {"external_id": None}
            if unlaunched:
                values["attempt"] = Run.attempt - 1
            session.execute(update(Run).where(Run.id == run_id, claim).values(**values)
                            .execution_options(synchronize_session=False))

    def _observe(self, session: Session, run: Run, status: Any) -> None:
        now = utcnow()
        state = status.state
        if state in (JobState.QUEUED, JobState.RUNNING):
            if state is JobState.RUNNING and run.status in WAITING:
                pool = self.pools.for_gpu(run.gpu_type or "cpu")
                if pool is not None and run.provisioning_since is not None:
                    seconds = record_wait(session, run, pool, "up", now)
                    log.info("run %s: a %s node took %.0f s to take it", run.id, pool.name, seconds)
                self._begin_attempt(session, run)  # Ray placed it: the clock starts now
            elif state is JobState.QUEUED and run.status in WAITING:
                self._provisioning(session, run, now)
            if RunStatus(run.status).is_terminal():
                # The worker keeps its key meanwhile: its next event is answered ``cancelled: true``.
                overdue = elapsed_seconds(run.completed_at, now) - self._grace(run)
                if overdue > KILL_AFTER_GRACE_SECONDS:
                    log.warning("run %s: its worker ignored the stop; killing it", run.id)
                    self._kill(run)
                    self._revoke_key(session, run)  # it was told and signalled: nothing it sends counts now
                elif overdue > 0:
                    log.info("run %s is %s but its worker still runs: stopping it", run.id, run.status)
                    self.executor.stop(run.external_id or "")
            elif run.status in (RunStatus.STARTING, RunStatus.RUNNING):
                heard = max(filter(None, [run.last_event_at, run.attempt_started_at]), default=None)
                if elapsed_seconds(heard, now) > self.settings.run_lost_after_seconds:
                    self._kill(run)
                    self._lost(session, run, f"no event for {int(elapsed_seconds(heard, now))} s")
            return
        # The worker is gone.
        if RunStatus(run.status).is_terminal():
            run.worker_exited_at = now
            self._exits.pop(run.id, None)
            self._revoke_key(session, run)  # nothing can use it now
            return
        if state is JobState.EXPIRED and run.status in WAITING:
            if run.status == RunStatus.PROVISIONING:  # still waiting for its node, since the first submission
                try_transition(session, run, RunStatus.PENDING, reason="its queued job expired in Ray: submitted "
                                                                       "again")
            run.attempt -= 1  # it never ran: waiting is not a lost attempt
            run.external_id = None
            log.info("run %s: still no %s node; submitting it again", run.id, run.gpu_type)
            return
        if state in (JobState.LOST, JobState.EXPIRED):
            self._lost(session, run, status.message or "worker lost")
            return
        first_seen = self._exits.setdefault(run.id, now)
        if elapsed_seconds(first_seen, now) < EXIT_GRACE_SECONDS:
            return  # its last events may still be on their way
        self._exits.pop(run.id, None)
        tail = self._log_tail(run)
        message = status.message or f"worker ended ({state.value})"
        if state is JobState.SUCCEEDED:
            message = "the trainer exited without reporting a result"
        self._fail_run(session, run, f"{message}{': ' + tail if tail else ''}", code="worker_exited")
        run.worker_exited_at = now

    def _provisioning(self, session: Session, run: Run, now: datetime) -> None:
        pool = self.pools.for_gpu(run.gpu_type or "cpu")
        if pool is None:
            return
        has_device = has_a_device(session, run, self._free_devices().get(pool.gpu), self.executor.name)
        if wait_for_node(session, run, pool, has_device, now):
            self.executor.stop(run.external_id or "")
            if fall_back(session, run, pool):
                return
            self._fail_run(session, run, f"no node of pool {pool.name} came up within "
                                         f"{pool.start_timeout_minutes:g} min (its pool's start_timeout_minutes); "
                                         "nothing was charged",
                           code="provisioning_timeout")

    def _grace(self, run: Run) -> float:
        """How long a finished run's worker may still run: a cancelled one stops itself on its next event."""
        return self.settings.cancel_grace_seconds if run.status == RunStatus.CANCELLED else 120.0

    def _kill(self, run: Run) -> None:
        try:
            self.executor.kill(run.external_id or "")
        except Exception:
            log.exception("could not stop the worker of run %s", run.id)

    def _log_tail(self, run: Run) -> str:
        try:
            return self.executor.log_tail(run.external_id or "", lines=8)[-1500:]
        except Exception:
            return ""

    def _lost(self, session: Session, run: Run, reason: str) -> None:
        """Close the attempt at its last sign of life (later time is Lanner's loss, refunded), then relaunch."""
        now = utcnow()
        if run.status in WAITING:  # lost before it ever ran (e.g. Ray could not set up the job)
            if run.status == RunStatus.PROVISIONING:
                try_transition(session, run, RunStatus.PENDING, reason=f"queued job lost: {reason}"[:200])
            if run.attempt <= self.settings.run_max_relaunches:
                run.external_id = None
                log.warning("run %s: queued attempt %s lost (%s); launching again", run.id, run.attempt, reason)
            else:
                self._fail_run(session, run, f"lost {run.attempt} times; last: {reason}", code="lost")
                run.worker_exited_at = now
            return
        end = max(filter(None, [run.last_event_at, run.attempt_started_at]), default=None)
        started = run.attempt_started_at
        if not try_transition(session, run, RunStatus.LOST, reason=f"lost: {reason}"[:200]):
            return
        if started is not None:
            run.billed_seconds = (run.billed_seconds or 0.0) + elapsed_seconds(started, end)
            run.attempt_started_at = None
        run.worker_exited_at = now
        self._exits.pop(run.id, None)
        self.charging.refund_excess(session, run, reason="Refund: time after the worker was lost")
        if run.attempt <= self.settings.run_max_relaunches:
            try_transition(session, run, RunStatus.PENDING, reason=f"relaunch {run.attempt + 1} with resume")
            run.external_id = None
            run.worker_exited_at = None
            log.warning("run %s lost (%s): relaunching (attempt %s)", run.id, reason, run.attempt + 1)
        else:
            self._fail_run(session, run, f"lost {run.attempt} times; last: {reason}", code="lost")

    def _fail_run(self, session: Session, run: Run, message: str, *, code: str) -> None:
        error = {"message": message[:2000], "code": code, "timestamp": iso(utcnow())}
        if try_transition(session, run, RunStatus.FAILED, reason=code):
            run.error = error
            session.execute(update(ModelRecord).where(ModelRecord.id == run.model_id)
                            .values(training_error=error).execution_options(synchronize_session=False))

    def _fail(self, run_id: int, message: str, *, code: str) -> None:
        """A run whose worker never started (nothing to watch)."""
        with self.ctx.db.session() as session:
            run = session.get(Run, run_id)
            if run is not None:
                self._fail_run(session, run, message, code=code)
                run.worker_exited_at = utcnow()
                self._revoke_key(session, run)  # no worker: even a run already settled (cancelled) keeps none

    # --- learn -----------------------------------------------------------------------------------

    def learn(self, force: bool = False) -> None:
        """About once a minute, running runs teach the GPU advisor (``learn.learn_from_running``)."""
        now = time.monotonic()
        if not force and now - self._learned_at < LEARN_EVERY_SECONDS:
            return
        self._learned_at = now
        learn_from_running(self.ctx.db, catalogue=self.catalogue)


def _bin_dir() -> str:
    return str(Path(sys.executable).parent)
