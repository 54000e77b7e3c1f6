"""The embedding job's states and the only ways they change (guarded compare-and-sets through ``lanner.status``,
each writing a ``StatusEvent``); the statuses are the SDK's (``activeJob.status``) and the export's:

    (requested) ──> queued
    queued ──> starting              the queue launched a worker through the executor (attempt n)
    starting ──> running             the executor says the worker runs
    starting | running ──> completed the worker exited 0: it found no image left without a vector
    starting | running ──> queued    the worker was lost (killed, its node or the server died): run it again, at
                                     most MAX_ATTEMPTS times; the next attempt embeds only what is still missing
    queued | starting | running ──> failed     the worker failed (its error kept) or was lost too often
    queued | starting | running ──> cancelled  ``datasets.delete_embeddings``; the queue stops its worker
"""

from __future__ import annotations

import secrets

from sqlalchemy.orm import Session

from lanner.db import utcnow
from lanner.embeddings.models import EmbeddingJob
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


def worker_path(job_id: str, slot: str, what: str) -> str:
    """The path of an attempt's signed worker link (``embeddings.router``): ``manifest`` or ``vectors``."""
    return f"/api/embeddings/jobs/{job_id}/{slot}/{what}"


def create(session: Session, job: EmbeddingJob) -> EmbeddingJob:
    session.add(job)
    record_created(session, job, reason=f"with {job.model_label}"[:300])
    return job


def new_attempt(job: EmbeddingJob) -> None:
    """Before launching: the next attempt number and a fresh token for its signed links."""
    job.attempt += 1
    job.slot = secrets.token_hex(8)


def launched(session: Session, job: EmbeddingJob, *, external_id: str, executor: str) -> bool:
    return try_change_status(session, job, STARTING, allowed_from=(QUEUED,), reason=f"attempt {job.attempt}",
                             external_id=external_id, executor=executor)


def running(session: Session, job: EmbeddingJob) -> bool:
    return try_change_status(session, job, RUNNING, allowed_from=(STARTING,), started_at=job.started_at or utcnow())


def complete(session: Session, job: EmbeddingJob) -> bool:
    return try_change_status(session, job, COMPLETED, allowed_from=LAUNCHED, reason=f"{job.processed} vectors",
                             completed_at=utcnow(), slot=None, started_at=job.started_at or utcnow())


def fail(session: Session, job: EmbeddingJob, message: str) -> bool:
    return try_change_status(session, job, FAILED, allowed_from=ACTIVE, reason=message[:300], error=message[:4000],
                             completed_at=utcnow(), slot=None)


def cancel(session: Session, job: EmbeddingJob) -> bool:
    return try_change_status(session, job, CANCELLED, allowed_from=ACTIVE, reason="cancelled by datasets."
                             "delete_embeddings", completed_at=utcnow(), slot=None)


def lost(session: Session, job: EmbeddingJob, why: str) -> None:
    """The worker is gone without an outcome: run the job again (its vectors so far are kept), or fail it."""
    if job.attempt >= MAX_ATTEMPTS:
        fail(session, job, f"the embedding worker was lost {job.attempt} times; last: {why}")
    else:
        try_change_status(session, job, QUEUED, allowed_from=LAUNCHED, reason=f"lost: {why}"[:300],
                          external_id=None, slot=None)
