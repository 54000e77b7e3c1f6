"""Upload sessions: the owner's lookup and the only ways an upload session's status changes. Every change is a
guarded compare-and-set through ``lanner.status`` that writes a ``StatusEvent``.

    (signed URL handed out) ──> pending
    pending ──> receiving                a PUT started: the slot is single use, a second PUT is refused before
                                         anything is stored (with a bucket's presigned URL: at completion, once
                                         the staged object was read back and hashed, see ``read_back``)
    receiving ──> pending                that PUT failed (too large, cut off): the client may try again
    receiving ──> uploaded               the file arrived
    uploaded ──> completed               ``upload.complete`` checked the size
    uploaded | completed ──> ingested    a dataset import took the file (the import job holds it from then on)
    pending | receiving | uploaded | completed ──> expired
                                         unfinished when its URL's life ended (``maintenance.gc``)

``sha256`` refers to the uploaded file only while someone still needs it: the import job takes it over, model
weights keep their own reference, and an expired session lets go; the collector then frees the bytes.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from lanner.db import Database
from lanner.errors import Conflict, NotFound
from lanner.status import InvalidStatusChange, change_status, record_created, try_change_status
from lanner.storage.blobs import BlobStore, StoredBlob
from lanner.storage.models import UploadSession

PENDING = "pending"
RECEIVING = "receiving"
UPLOADED = "uploaded"
COMPLETED = "completed"
INGESTED = "ingested"
EXPIRED = "expired"
UNFINISHED = (PENDING, RECEIVING, UPLOADED, COMPLETED)
SESSION_SLOT_PREFIX = "sessions/"  # the slot keys of upload sessions; every other key is a training checkpoint's

NOTHING_UPLOADED = "nothing was uploaded for this session yet: PUT the file to its uploadUrl first"


def create(session: Session, upload: UploadSession) -> UploadSession:
    upload.status = PENDING
    session.add(upload)
    record_created(session, upload)
    return upload


def slot_key(upload: UploadSession) -> str:
    """The upload slot of a session: its key in Lanner's signed PUT URL, or under a bucket's staging prefix."""
    return f"{SESSION_SLOT_PREFIX}{upload.id}/{upload.filename}"


def get_uploaded(session: Session, *, owner_id: str, session_id: str,
                 staged: StoredBlob | None = None) -> UploadSession:
    """The caller's upload session, once its file has arrived (404 for anyone else's, 409 before the PUT).
    ``staged``: what ``read_back`` found on the session's bucket slot, recorded here as its upload."""
    upload = session.get(UploadSession, session_id)
    if upload is None or upload.owner_id != owner_id:
        raise NotFound("upload session not found")
    if staged is not None and upload.status == PENDING:
        start_receiving(session, upload)
        mark_uploaded(session, upload, sha256=staged.sha256, size=staged.size)
    if upload.status == EXPIRED:
        raise Conflict("this upload session expired; ask for a new upload URL and upload again")
    if upload.status in (PENDING, RECEIVING):
        raise Conflict(NOTHING_UPLOADED)
    return upload


def read_back(db: Database, blobs: BlobStore, *, owner_id: str, session_id: str,
              max_bytes: int) -> StoredBlob | None:
    """A file the client PUT on a bucket's presigned URL, which Lanner never saw: the store reads the staged
    object back and hashes every byte (the client's word is never taken), refuses it over the slot's size (413,
    and the object goes) and files it by digest; ``get_uploaded`` then records it (pending -> receiving ->
    uploaded). Called before the request's transaction: reading gigabytes back must not hold SQLite's write
    lock. None when the store takes no presigned uploads, the session is not the caller's or not pending, or
    nothing was PUT (``get_uploaded`` then says so, 409)."""
    if not blobs.presigns:
        return None
    with db.read_session() as session:
        upload = session.get(UploadSession, session_id)
        if upload is None or upload.owner_id != owner_id or upload.status != PENDING:
            return None
        slot = slot_key(upload)
        limit = max_bytes if upload.total_bytes is None else min(upload.total_bytes, max_bytes)
    return blobs.settle_staged(slot, limit)


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
                             sha256=None)


def release_file(upload: UploadSession) -> None:
    """The file's bytes now belong to someone else (a model's weights) or to nobody: drop the reference."""
    upload.sha256 = None


def mark_completed(session: Session, upload: UploadSession) -> None:
    """uploaded -> completed; completing again (or after an import) changes nothing."""
    if upload.status == UPLOADED:
        try_change_status(session, upload, COMPLETED, allowed_from=(UPLOADED,))


def mark_ingested(session: Session, upload: UploadSession) -> None:
    """uploaded | completed -> ingested; an upload already imported refuses a second import (409). The import
    job takes over the reference to the file."""
    try:
        change_status(session, upload, INGESTED, allowed_from=(UPLOADED, COMPLETED), reason="dataset import",
                      sha256=None)
    except InvalidStatusChange:
        if upload.status == PENDING:
            raise Conflict(NOTHING_UPLOADED) from None
        raise Conflict("this upload was already imported; upload the file again to import it again") from None
