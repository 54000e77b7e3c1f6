"""Collecting blobs nobody needs any more: superseded checkpoints of training runs.

Blobs are content-addressed and shared (two models may hold the same weights, a dataset image may be in many
datasets), so a blob is deleted only when no row anywhere refers to it *and* nobody wrote it for a grace period
(every write, a deduplicated one too, refreshes its write time). ``BLOB_REFERENCES`` lists every column that
holds a blob digest; a test fails when a table gains such a column without being listed here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, func, or_, select
from sqlalchemy.orm import Session

from lanner.datasets.models import DatasetExport, DatasetItem, ImageBlob
from lanner.db import utcnow
from lanner.projects.models import ModelRecord
from lanner.storage.blobs import BlobStore
from lanner.storage.models import UploadSession
from lanner.training.models import Run, StagedUpload

log = logging.getLogger(__name__)

BLOB_REFERENCES: tuple[Any, ...] = (
    ImageBlob.sha256,
    ImageBlob.thumb_sha256,
    DatasetItem.sha256,
    DatasetExport.sha256,
    ModelRecord.weights_sha256,
    UploadSession.sha256,
    StagedUpload.sha256,
)


def is_referenced(session: Session, sha256: str) -> bool:
    return any(session.scalar(select(exists().where(column == sha256))) for column in BLOB_REFERENCES)


@dataclass(frozen=True)
class Collected:
    uploads: int
    blobs: int
    bytes: int


def superseded_checkpoints(session: Session, grace: timedelta) -> list[StagedUpload]:
    """Checkpoint uploads no relaunch and no model needs:

    - every upload of a run settled more than ``grace`` ago (the model keeps its weights by digest);
    - of a run still going, an unpromoted upload older than the run's newest resume checkpoint, once that newer
      one is ``grace`` old (a relaunch always takes the newest, so by then nobody is fetching the older one).
    """
    cutoff = utcnow() - grace
    settled = select(StagedUpload).join(Run, Run.id == StagedUpload.run_id).where(
        Run.settled_at.is_not(None), Run.settled_at < cutoff)
    newest_resume = (select(StagedUpload.run_id, func.max(StagedUpload.uploaded_at).label("at"))
                     .where(StagedUpload.filename == "last.pt", StagedUpload.uploaded_at.is_not(None),
                            StagedUpload.promoted_at.is_(None))
                     .group_by(StagedUpload.run_id).subquery())
    older = select(StagedUpload).join(Run, Run.id == StagedUpload.run_id).join(
        newest_resume, newest_resume.c.run_id == StagedUpload.run_id).where(
        Run.settled_at.is_(None), StagedUpload.promoted_at.is_(None), newest_resume.c.at < cutoff,
        or_(StagedUpload.uploaded_at < newest_resume.c.at,
            and_(StagedUpload.uploaded_at.is_(None), StagedUpload.created_at < cutoff)))
    return list(session.scalars(settled)) + list(session.scalars(older))


def collect_checkpoints(db: Any, blobs: BlobStore, grace_seconds: float) -> Collected:
    """Forget superseded checkpoint uploads, then delete the blobs that nothing refers to any more.

    Rows go first, in their own transaction: a crash between the two steps leaves an orphan blob (wasted
    space), never a row pointing at deleted bytes."""
    grace = timedelta(seconds=grace_seconds)
    with db.session() as session:
        rows = superseded_checkpoints(session, grace)
        digests = {row.sha256: row.size or 0 for row in rows if row.sha256}
        if rows:
            session.execute(delete(StagedUpload).where(StagedUpload.path.in_([row.path for row in rows])))
    return Collected(uploads=len(rows), **_delete_unreferenced(db, blobs, digests, grace_seconds))


def _delete_unreferenced(db: Any, blobs: BlobStore, digests: dict[str, int], grace_seconds: float
                         ) -> dict[str, int]:
    deleted = freed = 0
    for sha256 in sorted(digests):
        with db.session() as session:
            if is_referenced(session, sha256):
                continue
            if blobs.delete_if_idle(sha256, grace_seconds):
                deleted, freed = deleted + 1, freed + digests[sha256]
    if deleted:
        log.info("deleted %d superseded checkpoint blobs (%d bytes)", deleted, freed)
    return {"blobs": deleted, "bytes": freed}
