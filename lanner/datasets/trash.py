"""The trash: a deleted dataset stays restorable for ``TRASH_DAYS`` days, then ``purge_expired`` deletes it for
good. The trash listing promises ``daysRemaining``; whoever runs maintenance keeps that promise by calling
``purge_expired`` now and then (it is idempotent and cheap when nothing expired).

A purged dataset takes its versions, cached exports, import jobs and every manifest (with its items) that no
other dataset or version shares, and its image rows that nothing else uses. Image bytes are content-addressed and
may be shared with other datasets: purging returns the digests it let go of, and the caller deletes those nothing
refers to any more once the purge committed (``storage.references.delete_unreferenced``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets import service
from lanner.datasets.models import Dataset, DatasetExport, DatasetVersion, ImportJob
from lanner.db import iso, utcnow
from lanner.errors import BadRequest, Conflict, NotFound, NotImplementedOnSelfHosted
from lanner.projects.schemas import REGION
from lanner.storage import upload_sessions
from lanner.storage.models import UploadSession
from lanner.teams import permissions

TRASH_DAYS = 30


def trash_dataset(dataset: Dataset) -> None:
    dataset.deleted_at = utcnow()
    # The slug stays taken while in trash, so a restore never collides.


def restore_dataset(dataset: Dataset) -> None:
    if dataset.deleted_at is None:
        raise Conflict("dataset is not in the trash")
    dataset.deleted_at = None


def purge_dataset(session: Session, dataset: Dataset) -> set[str]:
    """Delete for good. Versions, exports and import jobs go with the row (``ON DELETE CASCADE``); then every
    manifest the dataset or its versions used, unless a clone or another version still shares it, and the image
    rows nothing uses any more. Returns the blob digests let go of (images, thumbnails, exports, uploads)."""
    manifests = {dataset.manifest_id, *session.scalars(select(DatasetVersion.manifest_id).where(
        DatasetVersion.dataset_id == dataset.id))}
    released = set(session.scalars(select(DatasetExport.sha256).where(DatasetExport.dataset_id == dataset.id)))
    released.update(session.scalars(select(ImportJob.source_sha256).where(
        ImportJob.dataset_id == dataset.id, ImportJob.source_sha256.is_not(None))))
    for upload in session.scalars(select(UploadSession).where(UploadSession.asset_id == dataset.id, or_(
            UploadSession.sha256.is_not(None), UploadSession.staged.is_(True)))):
        if upload.sha256:
            released.add(upload.sha256)
        upload_sessions.release_file(upload)  # a staged file is then settled by nobody: the collector takes it
    session.delete(dataset)
    session.flush()
    images: set[str] = set()
    for manifest_id in manifests:
        images |= service.drop_manifest_if_orphan(session, manifest_id)
    return released | service.forget_unused_images(session, images)


def purge_expired(session: Session, *, now: datetime | None = None) -> tuple[int, set[str]]:
    """Purge every dataset that has been in the trash longer than ``TRASH_DAYS``; returns how many, and the blob
    digests they let go of."""
    cutoff = (now or utcnow()) - timedelta(days=TRASH_DAYS)
    expired = list(session.scalars(select(Dataset).where(Dataset.deleted_at.is_not(None),
                                                         Dataset.deleted_at < cutoff)))
    released: set[str] = set()
    for dataset in expired:
        released |= purge_dataset(session, dataset)
    return len(expired), released


def trashed(session: Session, owner_id: str) -> list[Dataset]:
    return list(session.scalars(select(Dataset).where(Dataset.owner_id == owner_id, Dataset.deleted_at.is_not(None))
                                .order_by(Dataset.deleted_at.desc())))


def trash_owner(session: Session, principal: Principal, owner: str | None, *, action: str) -> str:
    """The id of the workspace whose trash is meant: the caller's own, or (``owner``) a team's where their role
    may ``action`` (see it: read; empty it: delete). Any other name is the 404 of one that does not exist."""
    owner_id, _ = permissions.workspace_for(session, user_id=principal.user_id, username=principal.username,
                                            owner=owner, action=action)
    return owner_id


def trashed_dataset(session: Session, principal: Principal, dataset_id: str, *, action: str = "write") -> Dataset:
    """A trashed dataset of the caller's own workspace or a team's where their role may ``action`` it (restore:
    write, delete for good: delete), found by its id whichever trash lists it."""
    dataset = session.get(Dataset, dataset_id)
    if dataset is None or dataset.deleted_at is None:
        raise NotFound("no such item in the trash")
    permissions.check(session, user_id=principal.user_id, owner_id=dataset.owner_id, visibility="private",
                      action=action, missing="no such item in the trash", read_only="no such item in the trash")
    return dataset


def listing(session: Session, principal: Principal, *, page: int, limit: int, type: str | None,
            item_id: str | None, owner: str | None = None) -> dict[str, Any]:
    """``lifecycle.trash``: only datasets go to the trash in Lanner; projects and models are deleted at once.
    ``owner``: a team's trash, for any of its members. ``type``: ``all`` (or none) or ``dataset`` lists them;
    ``project`` and ``model`` list nothing."""
    owner_id = trash_owner(session, principal, owner, action="read")
    items = [] if type not in (None, "all", "dataset") else trashed(session, owner_id)
    if item_id:
        items = [d for d in items if d.id == item_id]
    now = utcnow()
    rows = []
    total_bytes = 0
    for dataset in items:
        size = service.total_bytes(session, dataset.manifest_id)
        total_bytes += size
        assert dataset.deleted_at is not None
        remaining = TRASH_DAYS - (now - dataset.deleted_at).days
        rows.append({"_id": dataset.id, "type": "dataset", "name": dataset.name, "slug": dataset.slug,
                     "trashedAt": iso(dataset.deleted_at), "daysRemaining": max(0, remaining),
                     "sizeBytes": float(size)})
    start = (page - 1) * limit
    return {
        "items": rows[start:start + limit], "total": len(rows), "page": page, "limit": limit,
        "totalPages": max(1, -(-len(rows) // limit)),
        "summary": {"totalItems": len(rows), "totalSizeBytes": float(total_bytes), "byType": {
            "projects": {"count": 0}, "datasets": {"count": len(rows), "sizeBytes": float(total_bytes)},
            "models": {"count": 0, "sizeBytes": 0.0}, "exports": {"count": 0, "sizeBytes": 0.0}}},
        "region": REGION,
    }


def restore_item(session: Session, principal: Principal, *, type: str, item_id: str) -> None:
    if type != "dataset":
        raise NotImplementedOnSelfHosted("only datasets go to the trash in Lanner; projects and models are deleted")
    restore_dataset(trashed_dataset(session, principal, item_id))


def empty(session: Session, principal: Principal, body: dict[str, Any], *, owner: str | None = None
          ) -> tuple[int, set[str]]:
    """Body ``{id, type}`` deletes one item for good; ``{all: true}`` empties the trash, a team's (``owner``)
    for its editors and above. Returns how many, and the blob digests they let go of."""
    if body.get("id"):
        if body.get("type", "dataset") != "dataset":
            raise NotImplementedOnSelfHosted("only datasets go to the trash in Lanner")
        items = [trashed_dataset(session, principal, str(body["id"]), action="delete")]
    elif body.get("all") is True:
        items = trashed(session, trash_owner(session, principal, owner, action="delete"))
    else:
        raise BadRequest("send {id, type} to delete one item or {all: true} to empty the trash")
    released: set[str] = set()
    for dataset in items:
        released |= purge_dataset(session, dataset)
    return len(items), released
