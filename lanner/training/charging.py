"""Charging runs Lanner launched, the supervisor's billing passes (the price rule is ``lanner.billing.metering``):

- meter: charge running runs per second of their GPU's price, one ledger row per run per meter interval; stop a
  run at its ``maxCostCents`` or when the account runs dry (through the protocol: ``cancelled: true``);
- settle: once a run ends, charge it to its end time exactly, refund what a lost attempt was charged beyond its
  last sign of life, release the rest of the hold, and re-estimate the full run of a quick run.

Every step is idempotent (cumulative charges, ledger idempotency keys, ``settled_at``), so a pass that dies
half-way, or two servers running passes at once, cannot double-charge."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from lanner.accounts.models import ApiKey
from lanner.billing import service as billing
from lanner.billing.metering import charge_for, elapsed_seconds
from lanner.context import AppContext
from lanner.db import utcnow
from lanner.gpus.catalogue import Catalogue
from lanner.projects.models import ModelRecord
from lanner.training.keys import revoke_run_key
from lanner.training.models import Run
from lanner.training.quick_run import estimate_full_run, prepare_estimate
from lanner.training.state import RunStatus, try_transition

log = logging.getLogger("lanner.supervisor")
ENDED = (RunStatus.COMPLETED.value, RunStatus.FAILED.value, RunStatus.CANCELLED.value)


class Charging:
    def __init__(self, ctx: AppContext, catalogue: Catalogue) -> None:
        self.ctx = ctx
        self.catalogue = catalogue
        self._metered: dict[int, datetime] = {}  # run -> when its charges were last brought up to date

    # --- meter -----------------------------------------------------------------------------------

    def meter(self) -> None:
        with self.ctx.db.session() as session:
            running = list(session.scalars(select(Run.id).where(
                Run.executor.is_not(None), Run.attempt_started_at.is_not(None),
                Run.status.in_([RunStatus.STARTING.value, RunStatus.RUNNING.value]))))
        now = utcnow()
        every = self.ctx.settings.meter_interval_seconds
        for run_id in running:
            last = self._metered.get(run_id)
            if last is not None and elapsed_seconds(last, now) < every:
                continue  # one ledger row per run per interval, not per pass
            self._metered[run_id] = now
            with self.ctx.db.session() as session:
                run = session.get(Run, run_id)
                if run is None or run.attempt_started_at is None or RunStatus(run.status).is_terminal():
                    continue
                seconds = (run.billed_seconds or 0.0) + elapsed_seconds(run.attempt_started_at, utcnow())
                self._charge(session, run, seconds, stop_when_short=True)

    def _charge(self, session: Session, run: Run, seconds: float, *, stop_when_short: bool) -> None:
        target = charge_for(seconds, run.price_micros_per_hour or 0, run.gpu_count)
        capped = run.max_cost_micros is not None and target >= run.max_cost_micros
        if capped:
            target = run.max_cost_micros or 0
        model = session.get(ModelRecord, run.model_id)
        owner = model.owner_id if model is not None else None
        if owner is None:
            return
        shortfall = billing.charge_run_to(session, user_id=owner, run_id=run.id, target_micros=target,
                                          model_id=run.model_id, gpu_type=run.gpu_type,
                                          description=f"Training on {run.gpu_type}")
        if not stop_when_short:
            return
        if capped:
            self._stop_run(session, run, "budget_reached")
        elif shortfall > 0:
            self._stop_run(session, run, "credit_exhausted")

    def _stop_run(self, session: Session, run: Run, reason: str) -> None:
        """Cancel through the protocol: the trainer reads ``cancelled: true`` in its next webhook response."""
        if try_transition(session, run, RunStatus.CANCELLED, reason=reason):
            log.warning("run %s cancelled: %s", run.id, reason)

    def refund_excess(self, session: Session, run: Run, *, reason: str) -> None:
        """Bring the run's charges down to its billed seconds (capped by its budget)."""
        model = session.get(ModelRecord, run.model_id)
        if model is None:
            return
        target = charge_for(run.billed_seconds or 0.0, run.price_micros_per_hour or 0, run.gpu_count)
        if run.max_cost_micros is not None:
            target = min(target, run.max_cost_micros)
        billing.refund_run_to(session, user_id=model.owner_id, run_id=run.id, target_micros=target, reason=reason,
                              model_id=run.model_id, gpu_type=run.gpu_type)

    # --- settle ----------------------------------------------------------------------------------

    def settle(self) -> None:
        with self.ctx.db.session() as session:
            ended = list(session.execute(select(Run.id, Run.smoke).where(
                Run.executor.is_not(None), Run.settled_at.is_(None), Run.status.in_(ENDED))))
        for run_id, smoke in ended:
            if smoke:  # its re-estimate's model profiled outside the transaction that settles it
                prepare_estimate(self.ctx.db, run_id)
            with self.ctx.db.session() as session:
                run = session.get(Run, run_id)
                if run is None or run.settled_at is not None:
                    continue
                self._settle(session, run)
        self._revoke_finished_keys()

    def _revoke_finished_keys(self) -> None:
        """A settled run whose worker is gone keeps no valid key, whichever path (or server, before a restart)
        ended it: settlement leaves a live worker's key alone, and this catches it once the worker is gone."""
        with self.ctx.db.session() as session:
            stale = list(session.scalars(select(Run).join(ApiKey, ApiKey.id == Run.api_key_id).where(
                Run.executor.is_not(None), Run.settled_at.is_not(None), ApiKey.revoked_at.is_(None),
                or_(Run.worker_exited_at.is_not(None), Run.external_id.is_(None)))))
            for run in stale:
                revoke_run_key(session, run, key_cache=self.ctx.key_cache)

    def _settle(self, session: Session, run: Run) -> None:
        if run.attempt_started_at is not None:
            run.billed_seconds = (run.billed_seconds or 0.0) + elapsed_seconds(run.attempt_started_at,
                                                                               run.completed_at)
            run.attempt_started_at = None
        self._charge(session, run, run.billed_seconds or 0.0, stop_when_short=False)
        self.refund_excess(session, run, reason="Refund: charged beyond the run's end")
        model = session.get(ModelRecord, run.model_id)
        if model is not None:
            billing.release_hold(session, user_id=model.owner_id, run_id=run.id, model_id=run.model_id,
                                 gpu_type=run.gpu_type)
        if run.worker_exited_at is not None or run.external_id is None:
            # A worker still alive keeps its key until it is gone, so its next event is answered with the
            # protocol's ``cancelled: true`` (a 401 would only make the trainer stop reporting, not training).
            revoke_run_key(session, run, key_cache=self.ctx.key_cache)
        self._metered.pop(run.id, None)
        run.settled_at = utcnow()
        if run.smoke and run.status == RunStatus.COMPLETED and model is not None:
            try:
                with session.begin_nested():
                    model.full_run_estimate = estimate_full_run(session, run, model, catalogue=self.catalogue)
            except Exception:
                log.exception("could not re-estimate the full run of quick run %s", run.id)
