"""Run state machine. Every status change goes through ``transition``: a guarded compare-and-set that
writes a ``RunEvent`` and mirrors the status onto the model, so concurrent writers cannot skip a state.

    pending -> starting -> running -> completed | failed | cancelled
    (pending | starting) -> failed | cancelled        (never got going)
    (starting | running) -> lost -> pending            (worker vanished; relaunched with resume)
    lost -> failed | cancelled                         (relaunches used up, or the user gave up)

``lost`` is Lanner's own state; the SDK's job status knows no such word, so the wire shows it as ``pending``.
"""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import update
from sqlalchemy.orm import Session

from lanner.db import utcnow
from lanner.projects.models import ModelRecord
from lanner.training.models import Run, RunEvent


class RunStatus(StrEnum):
    PENDING = "pending"
    STARTING = "starting"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"

    def is_terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
ACTIVE = frozenset({RunStatus.PENDING, RunStatus.STARTING, RunStatus.RUNNING, RunStatus.LOST})

ALLOWED: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset({RunStatus.LOST}),
    RunStatus.LOST: frozenset({RunStatus.STARTING, RunStatus.RUNNING}),
    RunStatus.STARTING: frozenset({RunStatus.PENDING}),
    RunStatus.RUNNING: frozenset({RunStatus.STARTING}),
    RunStatus.COMPLETED: frozenset({RunStatus.STARTING, RunStatus.RUNNING}),
    RunStatus.FAILED: frozenset(ACTIVE),
    RunStatus.CANCELLED: frozenset(ACTIVE),
}


def wire_status(status: str) -> str:
    return RunStatus.PENDING.value if status == RunStatus.LOST else status


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
    model_values: dict = {"status": wire_status(to.value), "updated_at": now}
    if to.is_terminal():
        model_values["completed_at"] = now
    session.execute(update(ModelRecord).where(ModelRecord.id == run.model_id).values(**model_values)
                    .execution_options(synchronize_session=False))


def try_transition(session: Session, run: Run, to: RunStatus, *, reason: str | None = None) -> bool:
    try:
        transition(session, run, to, reason=reason)
    except InvalidTransition:
        return False
    return True
