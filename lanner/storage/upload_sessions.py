"""Upload sessions: the owner's lookup and the only ways an upload session's status changes. Every change is a
guarded compare-and-set through ``lanner.status`` that writes a ``StatusEvent``.

    (signed URL handed out) ──> pending
    pending | uploaded ──> uploaded      the file was PUT to the signed URL (again, until completed)
    uploaded ──> completed               ``upload.complete`` checked the size
    uploaded | completed ──> ingested    a dataset import took the file; it cannot be imported twice

An upload of model weights stops at ``completed``: ``upload.complete`` attaches it to its model.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from lanner.errors import Conflict, NotFound
from lanner.status import InvalidStatusChange, change_status, record_created, try_change_status
from lanner.storage.models import UploadSession

PENDING = "pending"
UPLOADED = "uploaded"
COMPLETED = "completed"
INGESTED = "ingested"

NOTHING_UPLOADED = "nothing was uploaded for this session yet: PUT the file to its uploadUrl first"


def create(session: Session, upload: UploadSession) -> UploadSession:
    upload.status = PENDING
    session.add(upload)
    record_created(session, upload)
    return upload


def get_uploaded(session: Session, *, owner_id: str, session_id: str) -> UploadSession:
    """The caller's upload session, once its file has arrived (404 for anyone else's, 409 before the PUT)."""
    upload = session.get(UploadSession, session_id)
    if upload is None or upload.owner_id != owner_id:
        raise NotFound("upload session not found")
    if upload.sha256 is None:
        raise Conflict(NOTHING_UPLOADED)
    return upload


def mark_uploaded(session: Session, upload: UploadSession, *, sha256: str, size: int) -> None:
    """Record the file's digest and size; a session already completed or ingested takes no new file (409)."""
    try:
        change_status(session, upload, UPLOADED, allowed_from=(PENDING, UPLOADED), sha256=sha256, size=size)
    except InvalidStatusChange:
        raise Conflict("this upload session was already used") from None  # create-only, like the hosted URLs


def mark_completed(session: Session, upload: UploadSession) -> None:
    """uploaded -> completed; completing again (or after an import) changes nothing."""
    if upload.status == UPLOADED:
        try_change_status(session, upload, COMPLETED, allowed_from=(UPLOADED,))


def mark_ingested(session: Session, upload: UploadSession) -> None:
    """uploaded | completed -> ingested; an upload already imported refuses a second import (409)."""
    try:
        change_status(session, upload, INGESTED, allowed_from=(UPLOADED, COMPLETED), reason="dataset import")
    except InvalidStatusChange:
        if upload.status == PENDING:
            raise Conflict(NOTHING_UPLOADED) from None
        raise Conflict("this upload was already imported; upload the file again to import it again") from None
