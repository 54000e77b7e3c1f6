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

import secrets

from sqlalchemy.orm import Session

from lanner.autolabel.models import AutolabelJob
from lanner.db import utcnow
from lanner.status import record_created, try_change_status

QUEUED = "queued"
STARTING = "starting"
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
ACTIVE = (QUEUED, STARTING, RUNNING)
LAUNCHED = (STARTING, RUNNING)
MAX_ATTEMPTS = 3


def create(session: Session, job: AutolabelJob, *, reason: str) -> AutolabelJob:
    session.add(job)
    record_created(session, job, reason=reason)
    return job


def new_attempt(job: AutolabelJob) -> None:
    """Before launching: the next attempt and a fresh token (a chunk from an older attempt is refused)."""
    job.attempt += 1
    job.slot = secrets.token_hex(8)


def launched(session: Session, job: AutolabelJob, *, external_id: str, executor: str) -> bool:
    return try_change_status(session, job, STARTING, allowed_from=(QUEUED,), reason=f"attempt {job.attempt}",
                             external_id=external_id, executor=executor)


def running(session: Session, job: AutolabelJob) -> bool:
    return try_change_status(session, job, RUNNING, allowed_from=(STARTING,), started_at=job.started_at or utcnow())


def complete(session: Session, job: AutolabelJob, reason: str) -> bool:
    return try_change_status(session, job, COMPLETED, allowed_from=LAUNCHED, reason=reason[:300],
                             completed_at=utcnow(), weights_sha256=None, started_at=job.started_at or utcnow())


def fail(session: Session, job: AutolabelJob, message: str) -> bool:
    return try_change_status(session, job, FAILED, allowed_from=ACTIVE, reason=message[:300], error=message[:4000],
                             completed_at=utcnow(), weights_sha256=None)


def cancel(session: Session, job: AutolabelJob) -> bool:
    return try_change_status(session, job, CANCELLED, allowed_from=ACTIVE, reason="cancelled by its owner",
                             completed_at=utcnow(), weights_sha256=None, stopping=True)


def lost(session: Session, job: AutolabelJob, why: str) -> None:
    """The worker is gone without finishing: run the rest again, or fail after MAX_ATTEMPTS."""
    if job.attempt >= MAX_ATTEMPTS:
        fail(session, job, f"the auto-annotation worker was lost {job.attempt} times; last: {why}")
    else:
        try_change_status(session, job, QUEUED, allowed_from=LAUNCHED, reason=f"lost: {why}"[:300],
                          external_id=None, slot=None)
