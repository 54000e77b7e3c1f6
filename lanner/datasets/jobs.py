"""Import jobs: ``datasets.ingest`` accepts an upload, and a background job imports it.

The request marks the upload ``ingested`` and the dataset ``processing`` in the request's transaction; the job
is queued only once that transaction has committed (an ``after_commit`` hook on the request's session), so the job
always finds the state the request wrote, on SQLite and PostgreSQL alike, and a request that fails queues
nothing. The job ends the dataset ``ready`` or ``failed`` (see ``datasets/state.py``), never ``processing``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from lanner.accounts.service import Principal
from lanner.config import Settings
from lanner.datasets import state
from lanner.datasets.ingest import ingest_path
from lanner.datasets.models import Dataset
from lanner.datasets.records import ImportRefused, scratch_dir
from lanner.db import Database
from lanner.errors import BadRequest
from lanner.storage import upload_sessions
from lanner.storage.blobs import BlobStore

log = logging.getLogger("lanner.datasets")

Submit = Callable[..., Any]


def start_import(session: Session, principal: Principal, dataset: Dataset, *, session_id: str, submit: Submit,
                 db: Database, blobs: BlobStore, settings: Settings) -> str:
    """Accept the caller's upload ``session_id`` for import into ``dataset`` and queue the job with ``submit``
    once ``session`` commits. Returns the job id (the upload session's id)."""
    upload = upload_sessions.get_uploaded(session, owner_id=principal.user_id, session_id=session_id)
    if upload.asset_type != "datasets" or (upload.asset_id and upload.asset_id != dataset.id):
        raise BadRequest("this upload session is not for this dataset")
    upload_sessions.mark_ingested(session, upload)  # 409 if already imported, by an earlier or a concurrent call
    state.start_import(session, dataset)  # 409 if the dataset is already importing
    job = (run_import, db, blobs, settings, dataset.id, upload.sha256, upload.filename)
    after_commit(session, lambda: submit(*job))
    return upload.id


def after_commit(session: Session, callback: Callable[[], Any]) -> None:
    """Run ``callback`` once ``session``'s transaction has committed; never if it rolls back first."""
    pending = [callback]

    def committed(_: Session) -> None:
        if pending:
            pending.pop()()

    event.listen(session, "after_commit", committed, once=True)
    event.listen(session, "after_rollback", lambda _: pending.clear(), once=True)


def run_import(db: Database, blobs: BlobStore, settings: Settings, dataset_id: str, sha256: str,
               filename: str) -> None:
    """The background job: the API has already answered. Any failure lands on the dataset as processingError."""
    staging: Path | None = None
    try:
        staging = Path(tempfile.mkdtemp(prefix="upload-", dir=scratch_dir(settings)))
        source = staging / filename
        blobs.copy_to(sha256, source)
        with db.session() as session:
            ingest_path(session, blobs=blobs, settings=settings, dataset_id=dataset_id, source=source, queued=True)
    except Exception as exc:  # an import must end in ready or failed, never stay processing
        log.warning("import into dataset %s failed: %s", dataset_id, exc, exc_info=not isinstance(exc, ImportRefused))
        message = str(exc) if isinstance(exc, ImportRefused) else f"import failed: {exc}"
        with db.session() as session:
            dataset = session.get(Dataset, dataset_id)
            if dataset is not None:
                state.fail_import(session, dataset, message)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
