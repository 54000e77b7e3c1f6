"""Upload sessions: the owner's lookup and the only ways an upload session's status changes. Every change is a
guarded compare-and-set through ``lanner.status`` that writes a ``StatusEvent``.

    (signed URL handed out) ──> pending
    pending ──> receiving                a PUT started: the slot is single use, a second PUT is refused before
                                         anything is stored
    receiving ──> pending                that PUT failed (too large, cut off): the client may try again
    receiving ──> uploaded               the file arrived
    pending ──> uploaded | completed     a bucket's presigned PUT (Lanner never saw it) was found by the import,
                                         or by ``upload.complete``, which checked its size (``find_staged``)
    uploaded ──> completed               ``upload.complete`` checked the size
    uploaded | completed ──> ingested    a dataset import took the file (the import job holds it from then on)
    pending | receiving | uploaded | completed ──> expired
                                         unfinished when its URL's life ended (``maintenance.gc``)
    uploaded | completed | ingested ──> rejected
                                         a staged file could not be settled: it changed size or vanished from
                                         the bucket after completion (the client PUT again on the valid URL)

Staged files (a bucket's presigned PUT, which Lanner never saw): completion and import only HEAD the object (409
nothing there, 413 over the slot's size and the object goes, 400 not the size announced) and mark the session
``staged``, with its size and no ``sha256`` yet. ``settle`` then hashes the bytes and files them by digest, off
the request path: the settle loop (``uploads.settle``) soon after completion, or the import worker as it reads
the archive anyway (whichever comes first; the other finds it done). Settling is idempotent, a settle killed
at any point runs again from the staged object, which is deleted only once the digest is recorded; and the
collector leaves the staged objects of live sessions alone (``live_slots``). Model checkpoints are settled at
completion (their model needs the digest at once).

``sha256`` refers to the uploaded file only while someone still needs it: the import job takes it over (or, for
a file settled after the import began, the session keeps it until the job ends), model weights keep their own
reference, and an expired session lets go; the collector then frees the bytes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from lanner.db import Database
from lanner.errors import Conflict, NotFound
from lanner.status import InvalidStatusChange, change_status, record_created, try_change_status
from lanner.storage.blobs import BlobStore, BlobTooLarge, StagedChanged
from lanner.storage.models import UploadSession

PENDING = "pending"
RECEIVING = "receiving"
UPLOADED = "uploaded"
COMPLETED = "completed"
INGESTED = "ingested"
EXPIRED = "expired"
REJECTED = "rejected"
UNFINISHED = (PENDING, RECEIVING, UPLOADED, COMPLETED)
SETTLEABLE = (UPLOADED, COMPLETED, INGESTED)  # a staged file of a session in these states is still needed
log = logging.getLogger(__name__)

SESSION_SLOT_PREFIX = "sessions/"  # the slot keys of upload sessions; every other key is a training checkpoint's

NOTHING_UPLOADED = "nothing was uploaded for this session yet: PUT the file to its uploadUrl first"
LOST = "the uploaded file could not be read back from the bucket ({why}); upload it again"


class UploadLost(Exception):
    """A staged upload that can never be settled (the session is ``rejected``); ``message`` is for its user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Staged:
    """A file a client PUT on a bucket's presigned URL, as ``find_staged`` found it: its size, and its digest
    when it was settled at once (a model checkpoint), else None (``settle`` hashes it later)."""

    slot: str
    size: int
    sha256: str | None = None


def create(session: Session, upload: UploadSession) -> UploadSession:
    upload.status = PENDING
    session.add(upload)
    record_created(session, upload)
    return upload


def slot_key(upload: UploadSession) -> str:
    """The upload slot of a session: its key in Lanner's signed PUT URL, or under a bucket's staging prefix."""
    return f"{SESSION_SLOT_PREFIX}{upload.id}/{upload.filename}"


def get_uploaded(session: Session, *, owner_id: str, session_id: str, staged: Staged | None = None,
                 found: str = UPLOADED) -> UploadSession:
    """The caller's upload session, once its file has arrived (404 for anyone else's, 409 before the PUT).
    ``staged``: what ``find_staged`` found on the session's bucket slot, recorded here as its upload: pending ->
    ``found`` (uploaded, or completed by ``upload.complete``) in one step, as nothing of that PUT went through
    Lanner (a concurrent call that recorded it first wins; this one reads what it recorded)."""
    upload = session.get(UploadSession, session_id)
    if upload is None or upload.owner_id != owner_id:
        raise NotFound("upload session not found")
    if staged is not None and upload.status == PENDING:
        try_change_status(session, upload, found, allowed_from=(PENDING,), reason="found in the bucket",
                          sha256=staged.sha256, size=staged.size, staged=staged.sha256 is None)
    if upload.status == EXPIRED:
        raise Conflict("this upload session expired; ask for a new upload URL and upload again")
    if upload.status == REJECTED:
        raise Conflict(LOST.format(why="it changed or vanished after the upload was completed"))
    if upload.status in (PENDING, RECEIVING):
        raise Conflict(NOTHING_UPLOADED)
    return upload


def find_staged(db: Database, blobs: BlobStore, *, owner_id: str, session_id: str, max_bytes: int) -> Staged | None:
    """A file the client PUT on a bucket's presigned URL, which Lanner never saw: one HEAD for its size, refused
    over the slot's size (413, and the object goes); ``get_uploaded`` then records it (pending -> receiving ->
    uploaded, ``staged``) and ``settle`` hashes it later. A model checkpoint is settled here (its model needs
    the digest now). Called before the request's transaction: settling must not hold SQLite's write lock. None
    when the store takes no presigned uploads, the session is not the caller's or not pending, or nothing was
    PUT (``get_uploaded`` then says so, 409)."""
    if not blobs.presigns:
        return None
    with db.read_session() as session:
        upload = session.get(UploadSession, session_id)
        if upload is None or upload.owner_id != owner_id or upload.status != PENDING:
            return None
        slot, limit, now = slot_key(upload), _limit(upload, max_bytes), upload.asset_type == "models"
    size = blobs.stat_staged(slot)
    if size is None:
        return None
    if size > limit:
        blobs.drop_staged(slot)
        raise BlobTooLarge(f"the upload has {size} bytes; this upload takes at most {limit}")
    if not now:
        return Staged(slot, size)
    stored = blobs.settle_staged(slot, limit, size=size)
    return None if stored is None else Staged(slot, stored.size, stored.sha256)


def _limit(upload: UploadSession, max_bytes: int) -> int:
    return max_bytes if upload.total_bytes is None else min(upload.total_bytes, max_bytes)


def settle(db: Database, blobs: BlobStore, upload_id: str, *, max_bytes: int,
           into: Path | None = None) -> tuple[str | None, bool]:
    """File a staged upload under its digest: hash the bucket's object (``into``: written to that file as it
    is read), record the digest on the session, then delete the staged object. Answers the session's digest
    (None once it let go of its file) and whether ``into`` holds those bytes. Idempotent and safe to race:
    the digest is recorded only on a session still staged, so a second settler (the loop and an import
    worker), or one rerun after a kill, finds it done or does the same again; the staged object goes only
    after the record. A file that changed size or vanished rejects the session (``UploadLost``)."""
    with db.read_session() as session:
        upload = session.get(UploadSession, upload_id)
        if upload is None:
            raise UploadLost(LOST.format(why="its upload session is gone"))
        if not upload.staged:
            return _settled(upload), False
        slot, size, limit = slot_key(upload), upload.size, _limit(upload, max_bytes)
    try:
        stored, why = blobs.settle_staged(slot, limit, size=size, into=into), "it vanished before it was hashed"
    except (BlobTooLarge, StagedChanged) as exc:  # PUT again on the still valid URL, after completion
        stored, why = None, str(exc)
    with db.session() as session:
        upload = _locked(session, upload_id)
        if upload.staged and stored is None:
            change_status(session, upload, REJECTED, allowed_from=SETTLEABLE, reason=why[:300], staged=False)
        elif upload.staged:
            assert stored is not None
            upload.sha256, upload.staged = stored.sha256, False
        recorded, staged_still, status = upload.sha256, upload.staged, upload.status
    if not staged_still:  # settled (by this call or another) or rejected: nothing needs the staged object now
        _drop(blobs, slot)
    if status == REJECTED:
        raise UploadLost(LOST.format(why=why if stored is None else "it changed after the upload was completed"))
    return recorded, stored is not None and into is not None and recorded == stored.sha256


def read_into(db: Database, blobs: BlobStore, upload_id: str, dest: Path, *, max_bytes: int) -> str:
    """The upload's file into ``dest`` (what an import reads): settled as it is read when still staged, else
    copied from its blob. Answers its digest; ``UploadLost`` when there is none any more."""
    digest, written = settle(db, blobs, upload_id, max_bytes=max_bytes, into=dest)
    if digest is None:
        raise UploadLost(LOST.format(why="its upload session let go of it"))
    if not written:  # settled before, or by another settler first
        dest.unlink(missing_ok=True)
        blobs.copy_to(digest, dest)
    return digest


def _drop(blobs: BlobStore, slot: str) -> None:
    """The staged object goes once the digest is recorded; one that stays (the bucket did not answer) is no live
    session's, and the collector deletes it."""
    try:
        blobs.drop_staged(slot)
    except Exception:
        log.warning("could not delete the settled upload %s from the bucket; the collector will", slot,
                    exc_info=True)


def _locked(session: Session, upload_id: str) -> UploadSession:
    """The session's row, locked until the transaction ends (SQLite's transaction already holds the lock)."""
    upload = session.get(UploadSession, upload_id, with_for_update=True, populate_existing=True)
    if upload is None:
        raise UploadLost(LOST.format(why="its upload session is gone"))
    return upload


def _settled(upload: UploadSession) -> str | None:
    if upload.status == REJECTED:
        raise UploadLost(LOST.format(why="it changed or vanished after the upload was completed"))
    return upload.sha256


def unsettled(session: Session) -> list[str]:
    """Sessions whose staged file waits to be settled, oldest first."""
    return list(session.scalars(select(UploadSession.id).where(
        UploadSession.staged.is_(True), UploadSession.status.in_(SETTLEABLE)).order_by(UploadSession.created_at)))


def live_slots(session: Session) -> set[str]:
    """The slots whose staged bytes live sessions still need: PUT and not completed yet, or not settled yet.
    The collector deletes other staged objects once idle (``BlobStore.collect_partial``)."""
    rows = session.execute(select(UploadSession.id, UploadSession.filename).where(or_(
        UploadSession.staged.is_(True), UploadSession.status.in_((PENDING, RECEIVING)))))
    return {f"{SESSION_SLOT_PREFIX}{upload_id}/{filename}" for upload_id, filename in rows}


def start_receiving(session: Session, upload: UploadSession) -> None:
    """pending -> receiving, before a single byte is stored: a slot already used or being written refuses (409)."""
    try:
        change_status(session, upload, RECEIVING, allowed_from=(PENDING,))
    except InvalidStatusChange:
        if upload.status == EXPIRED:
            raise Conflict("this upload session expired; ask for a new upload URL") from None
        raise Conflict("this upload URL was already used; ask for a new one to upload again") from None


def receiving_failed(session: Session, upload: UploadSession, reason: str) -> None:
    """receiving -> pending: the PUT did not complete, so nothing was kept and the client may try again."""
    try_change_status(session, upload, PENDING, allowed_from=(RECEIVING,), reason=reason[:300])


def mark_uploaded(session: Session, upload: UploadSession, *, sha256: str, size: int) -> None:
    """receiving -> uploaded with the file's digest and size."""
    try:
        change_status(session, upload, UPLOADED, allowed_from=(RECEIVING,), sha256=sha256, size=size)
    except InvalidStatusChange:
        raise Conflict("this upload session is not receiving a file") from None


def expire(session: Session, upload: UploadSession) -> bool:
    """An unfinished session whose URL's life is over lets go of its file."""
    return try_change_status(session, upload, EXPIRED, allowed_from=UNFINISHED, reason="upload URL expired",
                             sha256=None, staged=False)


def release_file(upload: UploadSession) -> None:
    """The file's bytes now belong to someone else (a model's weights) or to nobody: drop the reference (a staged
    file not settled yet is then settled by nobody, and collected)."""
    upload.sha256 = None
    upload.staged = False


def release_upload(session: Session, upload_id: str | None) -> None:
    """An import job ended: the file of its upload session, settled after the import began, is nobody's now."""
    upload = session.get(UploadSession, upload_id) if upload_id else None
    if upload is not None and (upload.sha256 is not None or upload.staged):
        release_file(upload)


def mark_completed(session: Session, upload: UploadSession) -> None:
    """uploaded -> completed; completing again (or after an import) changes nothing."""
    if upload.status == UPLOADED:
        try_change_status(session, upload, COMPLETED, allowed_from=(UPLOADED,))


def mark_ingested(session: Session, upload: UploadSession) -> None:
    """uploaded | completed -> ingested; an upload already imported refuses a second import (409). The import
    job takes over the reference to the file (a staged one stays the session's: ``settle`` records it there)."""
    try:
        change_status(session, upload, INGESTED, allowed_from=(UPLOADED, COMPLETED), reason="dataset import",
                      sha256=None)
    except InvalidStatusChange:
        if upload.status == PENDING:
            raise Conflict(NOTHING_UPLOADED) from None
        raise Conflict("this upload was already imported; upload the file again to import it again") from None
