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

from sqlalchemy.orm import Session

from lanner.db import utcnow
from lanner.embeddings.models import EmbeddingJob
from lanner.status import try_change_status
from lanner.training.executors import job_states

# an embedding job's statuses are an export's (``job_states``); callers say jobs.QUEUED
QUEUED, STARTING, RUNNING, COMPLETED, FAILED, CANCELLED = job_states.STATUSES
ACTIVE, LAUNCHED, MAX_ATTEMPTS = job_states.ACTIVE, job_states.LAUNCHED, job_states.MAX_ATTEMPTS

STATES = job_states.JobStates("embedding", ended={"slot": None})  # an ended job's signed links die with its slot
new_attempt, launched = STATES.new_attempt, STATES.launched
running, fail, lost = STATES.running, STATES.fail, STATES.lost


def worker_path(job_id: str, slot: str, what: str) -> str:
    """The path of an attempt's signed worker link (``embeddings.router``): ``manifest`` or ``vectors``."""
    return f"/api/embeddings/jobs/{job_id}/{slot}/{what}"


def create(session: Session, job: EmbeddingJob) -> EmbeddingJob:
    return STATES.create(session, job, reason=f"with {job.model_label}"[:300])


def complete(session: Session, job: EmbeddingJob) -> bool:
    return try_change_status(session, job, COMPLETED, allowed_from=LAUNCHED, reason=f"{job.processed} vectors",
                             completed_at=utcnow(), slot=None, started_at=job.started_at or utcnow())


def cancel(session: Session, job: EmbeddingJob) -> bool:
    return try_change_status(session, job, CANCELLED, allowed_from=ACTIVE, reason="cancelled by datasets."
                             "delete_embeddings", completed_at=utcnow(), slot=None)
