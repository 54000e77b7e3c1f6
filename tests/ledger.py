"""Ledger entries for tests of what reads the ledger (the account page, billing history): runs that were held
for and charged, without training anything."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update

from lanner.billing import service as billing
from lanner.billing.models import LedgerTransaction
from lanner.db import Database
from lanner.projects import service as projects_service
from lanner.training.models import Run

DOLLAR = 1_000_000


def make_run(db: Database, user_id: str, project: str = "p", model: str = "m", gpu: str = "rtx-4090"
             ) -> tuple[int, str]:
    """A run of a new model (the ledger only needs the row to point at); returns (run id, model id)."""
    with db.session() as session:
        proj = projects_service.get_or_create_project(session, owner_id=user_id, slug=project)
        record = projects_service.create_model(session, proj, name=model)
        run = Run(model_id=record.id, gpu_type=gpu)
        session.add(run)
        session.flush()
        return run.id, record.id


def spend_on(db: Database, user_id: str, run_id: int, model_id: str, *, hold: int, charge: int, settle: bool = True,
             gpu: str = "rtx-4090", at: datetime | None = None) -> None:
    """Hold ``hold``, charge ``charge`` and (``settle``) release the rest, as a run's life does; ``at`` back-dates
    the run's transactions."""
    with db.session() as session:
        billing.place_hold(session, user_id=user_id, run_id=run_id, micros=hold, estimate_micros=hold,
                           model_id=model_id, gpu_type=gpu)
        billing.charge_run_to(session, user_id=user_id, run_id=run_id, target_micros=charge, model_id=model_id,
                              gpu_type=gpu)
        if settle:
            billing.release_hold(session, user_id=user_id, run_id=run_id, model_id=model_id, gpu_type=gpu)
        if at is not None:
            session.execute(update(LedgerTransaction).where(LedgerTransaction.run_id == run_id).values(created_at=at))
