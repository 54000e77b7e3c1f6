"""Run state machine, and the only writer of run and model status. A run is created by ``create_run`` (its
first ``RunEvent``, from nothing) and changes only through ``transition``: a guarded compare-and-set that
writes a ``RunEvent`` and mirrors the status onto the model, so concurrent writers cannot skip a state. A
model's status follows its latest run through ``lanner.status.change_status`` (with a ``StatusEvent``); the
one change that is not a run's, a checkpoint uploaded into an untrained model, is ``mark_model_uploaded``.

    pending -> starting -> running -> completed | failed | cancelled
    pending -> provisioning -> starting                (its job waits for a node its pool brings up)
    provisioning -> pending                            (its queued job expired in Ray: submitted again)
    (pending | provisioning | starting) -> failed | cancelled        (never got going)
    (starting | running) -> lost -> pending            (worker vanished; relaunched with resume)
    lost -> failed | cancelled                         (relaunches used up, or the user gave up)

``lost`` and ``provisioning`` are Lanner's own states; the SDK's job status knows no such words (and ``ul cloud
train``'s wait would stop at one), so the wire shows both as ``pending`` and says more in the job's
``provisioning`` object.
"""

from __future__ import annotations

import logging
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from lanner.db import utcnow
from lanner.projects.models import MODEL_STATUSES, UNTRAINED, ModelRecord
from lanner.status import try_change_status
from lanner.training.models import Run, RunEvent

log = logging.getLogger("lanner.training")


class RunStatus(StrEnum):
    PENDING = "pending"
    PROVISIONING = "provisioning"
    STARTING = "starting"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"

    def is_terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
ACTIVE = frozenset({RunStatus.PENDING, RunStatus.PROVISIONING, RunStatus.STARTING, RunStatus.RUNNING,
                    RunStatus.LOST})
WAITING = frozenset({RunStatus.PENDING, RunStatus.PROVISIONING})  # not started: nothing billed yet

ALLOWED: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset({RunStatus.LOST, RunStatus.PROVISIONING}),
    RunStatus.PROVISIONING: frozenset({RunStatus.PENDING}),
    RunStatus.LOST: frozenset({RunStatus.STARTING, RunStatus.RUNNING}),
    RunStatus.STARTING: frozenset({RunStatus.PENDING, RunStatus.PROVISIONING}),
    RunStatus.RUNNING: frozenset({RunStatus.STARTING}),
    RunStatus.COMPLETED: frozenset({RunStatus.STARTING, RunStatus.RUNNING}),
    RunStatus.FAILED: frozenset(ACTIVE),
    RunStatus.CANCELLED: frozenset(ACTIVE),
}


def wire_status(status: str) -> str:
    return RunStatus.PENDING.value if status in (RunStatus.LOST, RunStatus.PROVISIONING) else status


class InvalidTransition(Exception):
    pass


def transition(session: Session, run: Run, to: RunStatus, *, reason: str | None = None) -> None:
    """Move ``run`` to ``to`` if, and only if, it is still in a state that allows it."""
    allowed = ALLOWED[to]
    now = utcnow()
    values: dict = {"status": to.value}
    if to.is_terminal():
        values["completed_at"] = now
        values["termination_reason"] = reason or to.value
    if to is RunStatus.RUNNING:
        values["started_at"] = now
    result = session.execute(
        update(Run).where(Run.id == run.id, Run.status.in_([s.value for s in allowed])).values(**values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        session.refresh(run)
        raise InvalidTransition(f"run {run.id}: {run.status} -> {to.value} not allowed")
    from_status = run.status
    session.refresh(run)
    session.add(RunEvent(run_id=run.id, from_status=from_status, to_status=to.value, reason=reason))
    _model_follows(session, run, reason=reason, now=now)


def try_transition(session: Session, run: Run, to: RunStatus, *, reason: str | None = None) -> bool:
    try:
        transition(session, run, to, reason=reason)
    except InvalidTransition:
        return False
    return True


def create_run(session: Session, model: ModelRecord, *, status: RunStatus, reason: str, **fields: Any) -> Run:
    """A new run of ``model`` in ``status`` with its first event, from nothing; the model follows."""
    run = Run(model_id=model.id, status=status.value, **fields)
    session.add(run)
    session.flush()
    session.add(RunEvent(run_id=run.id, from_status=None, to_status=run.status, reason=reason))
    _model_follows(session, run, reason=reason, now=utcnow(), model=model)
    return run


def _model_follows(session: Session, run: Run, *, reason: str | None, now: datetime,
                   model: ModelRecord | None = None) -> None:
    """The model shows its latest run's status (as the wire says it). Any model status may give way to it."""
    model = model or session.get(ModelRecord, run.model_id)
    if model is None:
        return  # deleted meanwhile: nothing to mirror onto
    status = RunStatus(run.status)
    values: dict[str, Any] = {"updated_at": now}
    if status.is_terminal():
        values["completed_at"] = now
    if not try_change_status(session, model, wire_status(status.value), allowed_from=MODEL_STATUSES,
                             reason=f"run {run.id}: {reason or status.value}"[:300], **values):
        log.warning("model %s is %s, not a model status: not mirroring run %s", model.id, model.status, run.id)


def mark_model_uploaded(session: Session, model: ModelRecord) -> bool:
    """An uploaded checkpoint makes an untrained model a trained one, ready to use or train from (``ul cloud
    train model=./my.pt`` uploads it with ``assetType: models``). False when the model had a status already."""
    return try_change_status(session, model, RunStatus.COMPLETED.value, allowed_from=(UNTRAINED,),
                             reason="weights uploaded")
