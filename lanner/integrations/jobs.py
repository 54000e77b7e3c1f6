"""Bucket import jobs: the request queues one (the dataset becomes ``processing``); ``queue.BucketImports``
claims it and runs ``importer.run``:

    queued ──> running ──> succeeded        the dataset's new content committed in the same transaction
    queued | running ──> failed             refused, or interrupted MAX_ATTEMPTS times (the dataset fails too)
    running ──> queued                      its process died (heartbeat older than STALE): run again

Each status change goes through ``lanner.status`` (an audit event). The dataset is not put in ``processing``
meanwhile: the upload import queue fails any dataset ``processing`` without an upload job of its own (a server
older than import jobs left it so), and the new content is swapped in all at once at the end anyway
(``ingest.commit_import``), so the dataset stays usable while its bucket is read; a second import of either kind
is applied after it, on the manifest as it then is.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets.models import Dataset
from lanner.db import utcnow
from lanner.integrations.models import BucketImport, StorageIntegration
from lanner.status import change_status, record_created, try_change_status

QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"
MAX_ATTEMPTS = 3
STALE = timedelta(minutes=10)  # a running job whose heartbeat is older lost its process


def start(session: Session, principal: Principal, dataset: Dataset, integration: StorageIntegration, *,
          target: str, prefix: str) -> BucketImport:
    job = BucketImport(dataset_id=dataset.id, owner_id=principal.user_id, integration_id=integration.id,
                       target=target, prefix=prefix, status=QUEUED)
    session.add(job)
    record_created(session, job, reason="bucket import queued")
    return job


def claim(session: Session, job: BucketImport) -> bool:
    now = utcnow()
    return try_change_status(session, job, RUNNING, allowed_from=(QUEUED,), reason=f"attempt {job.attempts + 1}",
                             attempts=job.attempts + 1, started_at=now, heartbeat_at=now)


def progress(session: Session, job: BucketImport, stage: str, done: int, total: int) -> None:
    job.stage, job.done, job.total, job.heartbeat_at = stage, done, total, utcnow()


def succeed(session: Session, job: BucketImport, result: dict) -> None:
    change_status(session, job, SUCCEEDED, allowed_from=(RUNNING,), result=result, finished_at=utcnow())


def fail(session: Session, job: BucketImport, message: str) -> None:
    try_change_status(session, job, FAILED, allowed_from=(QUEUED, RUNNING), reason=message[:300], error=message,
                      finished_at=utcnow())


def next_queued(session: Session) -> BucketImport | None:
    return session.scalar(select(BucketImport).where(BucketImport.status == QUEUED)
                          .order_by(BucketImport.created_at).limit(1))


def requeue_stale(session: Session) -> None:
    """Running jobs whose process stopped beating: queued again, or failed after MAX_ATTEMPTS."""
    for job in session.scalars(select(BucketImport).where(BucketImport.status == RUNNING,
                                                          BucketImport.heartbeat_at < utcnow() - STALE)):
        if job.attempts >= MAX_ATTEMPTS:
            fail(session, job, f"the import was interrupted {job.attempts} times")
        else:
            try_change_status(session, job, QUEUED, allowed_from=(RUNNING,), reason="its process stopped")


def to_json(job: BucketImport) -> dict:
    return {"id": job.id, "status": job.status, "stage": job.stage, "done": job.done, "total": job.total,
            "target": job.target, "prefix": job.prefix, "error": job.error, "result": job.result}
