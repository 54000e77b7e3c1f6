"""The scores job's states and the only ways they change (compare-and-sets through ``lanner.status``, each writing
a ``StatusEvent``), the auto-annotation run's machine (``autolabel.jobs``):

    (asked) ──> queued ──> starting ──> running ──> completed   the last image's predictions were scored
    starting | running ──> queued      the worker was lost: the next attempt predicts only the unscored images
    queued | starting | running ──> failed | cancelled
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from lanner.db import utcnow
from lanner.review.models import ReviewJob
from lanner.status import try_change_status
from lanner.training.executors import job_states

QUEUED, STARTING, RUNNING, COMPLETED, FAILED, CANCELLED = job_states.STATUSES
ACTIVE, LAUNCHED, MAX_ATTEMPTS = job_states.ACTIVE, job_states.LAUNCHED, job_states.MAX_ATTEMPTS

STATES = job_states.JobStates("review scores", ended={"slot": None})
new_attempt, launched = STATES.new_attempt, STATES.launched
running, fail, lost = STATES.running, STATES.fail, STATES.lost


def create(session: Session, job: ReviewJob) -> ReviewJob:
    return STATES.create(session, job, reason=f"{job.total} images with {job.model_label}"[:300])


def complete(session: Session, job: ReviewJob) -> bool:
    return try_change_status(session, job, COMPLETED, allowed_from=LAUNCHED, reason=f"{job.processed} images scored",
                             completed_at=utcnow(), slot=None, started_at=job.started_at or utcnow())


def cancel(session: Session, job: ReviewJob) -> bool:
    return try_change_status(session, job, CANCELLED, allowed_from=ACTIVE, reason="cancelled by its owner",
                             completed_at=utcnow(), slot=None)
