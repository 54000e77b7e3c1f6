"""The one garbage collector: blobs, upload sessions, half-written uploads and scratch folders nobody needs.

A blob is deleted only when no row refers to it and nobody wrote it for a grace period: which rows refer to
blobs, and deleting those nothing refers to, is ``storage.references``. What the collector adds is finding them.

Who frees what:
- ``collect_checkpoints``: superseded checkpoint uploads and their blobs;
- ``storage.references.collect_after_commit``: the digests a purge or a deleted export let go of;
- ``sweep``: everything else, by walking the store a few shards per pass: images stored by an import that was
  killed before it committed, archives of expired uploads, bytes of a PUT that lost a race, dataset exports
  past their expiry; plus expired upload sessions, half-written uploads and scratch folders of dead processes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lanner import scratch
from lanner.config import Settings
from lanner.datasets import service as datasets_service
from lanner.datasets.models import DatasetExport
from lanner.db import utcnow
from lanner.storage import upload_sessions
from lanner.storage.blobs import BlobStore
from lanner.storage.models import UploadSession
from lanner.storage.references import delete_unreferenced
from lanner.training.models import Run, StagedUpload

log = logging.getLogger(__name__)

SHARDS = tuple(f"{i:02x}" for i in range(256))
SHARDS_PER_PASS = 16  # a full sweep every 16 maintenance passes (16 minutes at the default interval)
# A half-written file is being written right now unless it sat still this long, whatever the grace period: every
# chunk a PUT or an import writes refreshes its time, and deleting it under its writer fails that write.
PARTIAL_MIN_IDLE_SECONDS = 600.0


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
    collected = delete_unreferenced(db, blobs, digests, grace_seconds)
    if collected["blobs"]:
        log.info("deleted %d superseded checkpoint blobs (%d bytes)", collected["blobs"], collected["bytes"])
    return Collected(uploads=len(rows), **collected)


@dataclass(frozen=True)
class Swept:
    upload_sessions: int
    exports: int
    image_rows: int
    blobs: int
    partial_uploads: int
    scratch: int


def sweep(db: Any, blobs: BlobStore, settings: Settings, shards: tuple[str, ...] | list[str] = SHARDS) -> Swept:
    """One pass of the collector over ``shards`` of the store (all of them unless told otherwise)."""
    grace = settings.blob_grace_seconds
    cutoff = utcnow() - timedelta(seconds=grace)
    with db.session() as session:
        expired = list(session.scalars(select(UploadSession).where(
            UploadSession.status.in_(upload_sessions.UNFINISHED), UploadSession.expires_at < cutoff)))
        expired_count = sum(upload_sessions.expire(session, upload) for upload in expired)
        exports = session.execute(delete(DatasetExport).where(DatasetExport.expires_at < cutoff)).rowcount
        live_slots = upload_sessions.live_slots(session)  # their staged bytes wait for completion or a settle
    image_rows = deleted = 0
    for shard in shards:
        idle = list(blobs.iter_idle(shard, grace))
        if not idle:
            continue
        image_rows += _forget_unused_images(db, idle)
        deleted += delete_unreferenced(db, blobs, set(idle), grace)["blobs"]
    result = Swept(upload_sessions=expired_count, exports=exports or 0, image_rows=image_rows, blobs=deleted,
                   partial_uploads=blobs.collect_partial(max(grace, PARTIAL_MIN_IDLE_SECONDS), keep=live_slots),
                   scratch=scratch.collect(settings.resolved_home, grace))
    if any(vars(result).values()):
        log.info("collected %s", result)
    return result


def _forget_unused_images(db: Any, digests: list[str]) -> int:
    """Image rows no dataset item uses any more (their images were deleted from a dataset): without the row,
    the image and its thumbnail are unreferenced. The foreign key from items makes a concurrent import that
    starts using one of them again win: this transaction then fails and a later pass retries."""
    forgotten = 0
    for start in range(0, len(digests), 500):
        try:
            with db.session() as session:
                forgotten += len(datasets_service.forget_unused_images(session, set(digests[start:start + 500])))
        except IntegrityError:
            log.info("an image came back into use while it was being forgotten; the next pass retries")
    return forgotten
