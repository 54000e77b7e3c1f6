"""Import jobs: ``datasets.ingest`` accepts an upload, and a worker process imports it later.

The request turns the upload into an ``ImportJob`` row and marks the dataset ``processing``, in the request's
transaction; once that commits, the import queue (``datasets.imports.queue``) is woken and runs the job in a
worker process (``datasets.imports.worker``). The row is the job's durable state, so nothing depends on a
thread or process surviving:

    (upload accepted) ──> queued
    queued ──> running          a dispatcher claimed it and started a worker process
    running ──> succeeded       the worker committed the new content, in the same transaction
    running ──> queued          the server running it died or stopped: run it again (at most MAX_ATTEMPTS times)
    queued | running ──> failed the upload was refused, the worker died, ran out of time or memory

A job that ends takes its dataset out of ``processing`` (``datasets/state.py``) in the same transaction, and
drops its reference to the uploaded file, which the collector then frees (``maintenance.gc``).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets import state
from lanner.datasets.models import Dataset, ImportJob
from lanner.db import utcnow
from lanner.errors import BadRequest
from lanner.status import change_status, record_created, try_change_status
from lanner.storage import upload_sessions

QUEUED = "queued"
RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
LIVE = (QUEUED, RUNNING)

MAX_ATTEMPTS = 3  # a job interrupted this often (its server died each time) is failed, not retried forever

INTERRUPTED = "the import was interrupted {attempts} times (the server stopped while it ran); upload the file again"


def start_import(session: Session, principal: Principal, dataset: Dataset, *, session_id: str,
                 staged: upload_sessions.Staged | None = None) -> ImportJob:
    """Accept the caller's upload ``session_id`` for import into ``dataset``: a queued job that now holds the
    uploaded file (the upload session lets go of it). ``staged``: a file PUT straight into a bucket whose size
    ``upload_sessions.find_staged`` checked (the SDK may skip ``upload.complete`` for dataset uploads). A file
    not hashed yet has no digest here: the session keeps it, the worker settles it as it reads it
    (``source_sha256`` stays None) and the job's end lets go of it."""
    upload = upload_sessions.get_uploaded(session, owner_id=principal.user_id, session_id=session_id,
                                          staged=staged)
    if upload.asset_type != "datasets" or (upload.asset_id and upload.asset_id != dataset.id):
        raise BadRequest("this upload session is not for this dataset")
    source = upload.sha256
    upload_sessions.mark_ingested(session, upload)  # 409 if already imported, by an earlier or a concurrent call
    state.start_import(session, dataset)  # 409 if the dataset is already importing
    job = ImportJob(dataset_id=dataset.id, owner_id=dataset.owner_id, upload_id=upload.id,
                    filename=upload.filename, source_sha256=source, status=QUEUED)
    session.add(job)
    record_created(session, job, reason="upload accepted")
    return job


def claim(session: Session, job: ImportJob, worker: str) -> bool:
    """queued -> running for ``worker``; False if another dispatcher took it first."""
    now = utcnow()
    return try_change_status(session, job, RUNNING, allowed_from=(QUEUED,), reason=f"attempt {job.attempts + 1}",
                             attempts=job.attempts + 1, worker=worker, started_at=now, heartbeat_at=now)


def succeed(session: Session, job: ImportJob) -> None:
    """running -> succeeded; the caller commits it with the dataset's new content."""
    change_status(session, job, SUCCEEDED, allowed_from=(RUNNING,), source_sha256=None, finished_at=utcnow())
    upload_sessions.release_upload(session, job.upload_id)


def fail(session: Session, job: ImportJob, message: str) -> bool:
    """queued | running -> failed, and the dataset processing -> failed with ``message`` (words for the user)."""
    if not try_change_status(session, job, FAILED, allowed_from=LIVE, reason=message[:300], error=message,
                             source_sha256=None, finished_at=utcnow()):
        return False
    upload_sessions.release_upload(session, job.upload_id)
    dataset = session.get(Dataset, job.dataset_id)
    if dataset is not None:
        state.fail_import(session, dataset, message)
    return True


def interrupted(session: Session, job: ImportJob, why: str) -> None:
    """The process running ``job`` is gone without an outcome: queue it again, or fail it after MAX_ATTEMPTS.
    An import is all or nothing (``ingest.commit_import``), so running it again from the start is safe, and
    the images the lost attempt stored are found already stored."""
    if job.attempts >= MAX_ATTEMPTS:
        fail(session, job, INTERRUPTED.format(attempts=job.attempts))
    else:
        try_change_status(session, job, QUEUED, allowed_from=(RUNNING,), reason=why[:300], worker=None)


def live_jobs(session: Session) -> list[ImportJob]:
    return list(session.scalars(select(ImportJob).where(ImportJob.status.in_(LIVE)).order_by(ImportJob.created_at)))


def last_starts(session: Session, owner_ids: set[str]) -> dict[str, datetime]:
    """When each of these users' most recent import started (users who never imported are absent)."""
    rows = session.execute(select(ImportJob.owner_id, func.max(ImportJob.started_at))
                           .where(ImportJob.owner_id.in_(owner_ids), ImportJob.started_at.is_not(None))
                           .group_by(ImportJob.owner_id))
    return {owner: started for owner, started in rows}


def stranded_datasets(session: Session) -> list[Dataset]:
    """Datasets ``processing`` with no live job: left by a server older than import jobs, or by a job row
    removed by hand. Nothing will ever finish them, so the queue fails them."""
    live = select(ImportJob.dataset_id).where(ImportJob.status.in_(LIVE))
    return list(session.scalars(select(Dataset).where(Dataset.status == state.PROCESSING,
                                                      Dataset.id.not_in(live))))
