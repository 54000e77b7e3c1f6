"""The worker process of one import job: ``python -m lanner.datasets.imports.worker``, started by the import
queue (``datasets.imports.queue``) with the job in a JSON document on stdin.

Why a process and not a thread of the server: an upload is untrusted input, and parsing it can cost more than
anyone planned (a decompression or YAML bomb the importers have not seen yet, a 2 GB COCO file). In its own
process it runs under an address-space limit (``LANNER_IMPORT_MEMORY_BYTES``), its CPU time is the kernel's to
share, and whatever it does, the API and other users' imports keep going. It dies with the server that started
it (``PR_SET_PDEATHSIG``), so a job is only ever run by a live server; the job row says what happened.
"""

from __future__ import annotations

import json
import logging
import resource
import sys
from pathlib import Path
from typing import Any

from lanner.config import Settings
from lanner.datasets.imports import jobs as import_jobs
from lanner.datasets.imports.ingest import commit_import, prepare_import
from lanner.datasets.imports.probe_worker import die_with_parent
from lanner.datasets.models import Dataset, ImportJob
from lanner.datasets.records import ImportRefused
from lanner.db import Database
from lanner.scratch import scratch_folder
from lanner.storage import upload_sessions
from lanner.storage.backends import open_blob_store
from lanner.storage.blobs import BlobStore

log = logging.getLogger("lanner.datasets.import")

INTERNAL_ERROR = "the import failed because of an internal error (import job {job}); the server log has the details"
OUT_OF_MEMORY = ("the upload needs more memory than an import may use ({limit} MiB, LANNER_IMPORT_MEMORY_BYTES); "
                 "split it into smaller uploads")


def run_job(db: Database, blobs: BlobStore, settings: Settings, job_id: str, worker: str) -> str:
    """Run the job claimed for ``worker``; returns its outcome. Every failure lands on the job and its dataset
    as a message for the user; internal details go to the log only."""
    with db.session() as session:
        job = session.get(ImportJob, job_id)
        if job is None or job.status != import_jobs.RUNNING or job.worker != worker or \
                not (job.source_sha256 or job.upload_id):
            return "not mine"  # requeued and taken by another worker, or already ended
        sha256, filename, upload_id = job.source_sha256, job.filename, job.upload_id
    try:
        with scratch_folder(settings.resolved_home, "upload-") as staging:
            source = staging / filename
            if sha256:
                blobs.copy_to(sha256, source)
            else:  # PUT straight into a bucket and not hashed yet: hashed (and filed by digest) as it is read
                _read_upload(db, blobs, settings, upload_id, source)
            with prepare_import(blobs=blobs, settings=settings, source=source) as prepared, \
                    db.session() as session:
                job = session.get(ImportJob, job_id)
                if job is None or job.status != import_jobs.RUNNING or job.worker != worker:
                    session.rollback()
                    return "not mine"
                dataset = session.get(Dataset, job.dataset_id)
                if dataset is None or dataset.deleted_at is not None:
                    raise ImportRefused("the dataset was deleted during the import")
                commit_import(session, prepared, dataset=dataset, queued=True)
                import_jobs.succeed(session, job)
        return "succeeded"
    except ImportRefused as exc:
        message = exc.message
    except MemoryError:
        message = OUT_OF_MEMORY.format(limit=settings.import_memory_bytes // 2**20)
    except Exception:
        log.exception("import job %s failed", job_id)
        message = INTERNAL_ERROR.format(job=job_id)
    with db.session() as session:
        job = session.get(ImportJob, job_id)
        if job is not None and job.worker == worker:
            import_jobs.fail(session, job, message)
    return "failed"


def _read_upload(db: Database, blobs: BlobStore, settings: Settings, upload_id: str | None, dest: Path) -> None:
    try:
        upload_sessions.read_into(db, blobs, upload_id or "", dest, max_bytes=settings.max_upload_bytes)
    except upload_sessions.UploadLost as lost:
        raise ImportRefused(lost.message) from None


def _limit_memory(limit: int) -> None:
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> None:
    spec: dict[str, Any] = json.loads(sys.stdin.read())
    die_with_parent(int(spec["parent"]))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s import-worker %(message)s")
    settings = Settings.model_validate(spec["settings"])
    _limit_memory(settings.import_memory_bytes)
    db = Database(settings.resolved_database_url)
    try:
        outcome = run_job(db, open_blob_store(settings), settings, spec["job"], spec["worker"])
    finally:
        db.dispose()
    log.info("import job %s: %s", spec["job"], outcome)


if __name__ == "__main__":
    main()
