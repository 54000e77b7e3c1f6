"""The auto-annotation run's states and the only ways they change (compare-and-sets through ``lanner.status``,
each writing a ``StatusEvent``), the same machine as an export's (``exports.jobs``):

    (asked) ──> queued
    queued ──> starting               the queue launched a worker through the executor (attempt n)
    starting ──> running              the executor says the worker runs
    starting | running ──> completed  the last image was recorded (``service.record_chunk``)
    starting | running ──> queued     the worker was lost (killed, its node died): run it again for the images not
                                      yet recorded, at most MAX_ATTEMPTS times
    queued | starting | running ──> failed     the worker failed, or the credit ran out
    queued | starting | running ──> cancelled  the owner cancelled it (``datasets.delete_batch``)

A preview is created ``completed``: it runs in the request and applies nothing.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from lanner.autolabel.models import AutolabelJob
from lanner.db import utcnow
from lanner.status import try_change_status
from lanner.training.executors import job_states

# a run's statuses are an export's (``job_states``); callers say jobs.QUEUED
QUEUED, STARTING, RUNNING, COMPLETED, FAILED, CANCELLED = job_states.STATUSES
ACTIVE, LAUNCHED, MAX_ATTEMPTS = job_states.ACTIVE, job_states.LAUNCHED, job_states.MAX_ATTEMPTS

STATES = job_states.JobStates("auto-annotation", ended={"weights_sha256": None})  # an ended run lets go of the weights
create, new_attempt, launched = STATES.create, STATES.new_attempt, STATES.launched
running, fail, lost = STATES.running, STATES.fail, STATES.lost


def complete(session: Session, job: AutolabelJob, reason: str) -> bool:
    return try_change_status(session, job, COMPLETED, allowed_from=LAUNCHED, reason=reason[:300],
                             completed_at=utcnow(), weights_sha256=None, started_at=job.started_at or utcnow())


def cancel(session: Session, job: AutolabelJob) -> bool:
    return try_change_status(session, job, CANCELLED, allowed_from=ACTIVE, reason="cancelled by its owner",
                             completed_at=utcnow(), weights_sha256=None, stopping=True)
