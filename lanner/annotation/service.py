"""Labelling one image at a time: the editor's view of an image (labels, revision, neighbours in the grid's
order) and a save that is safe to retry and never silently overwrites someone else's change.

A save names the revision it was edited from and an ``editId`` the client keeps across retries:
- the same ``editId`` as the last edit applied answers the current state (a retried request is applied once);
- another revision is a 409 carrying the current state, saying who changed the image;
- otherwise the labels are validated and stored exactly as the importers store them (``datasets.items``), on
  the dataset's private copy of a shared manifest, with the revision bumped under a guarded UPDATE, so two
  saves from one revision cannot both win.

Proposals (``proposals``) are resolved by the save: how many were kept unchanged, and ``labelledBy`` names the
model when the person accepted its proposals as they were.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.annotation import proposals
from lanner.annotation.models import LabelProposal
from lanner.annotation.proposals import acceptance, propose
from lanner.annotation.schemas import SaveLabels, label_state
from lanner.datasets import items, service
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.errors import BadRequest, Conflict, NotFound
from lanner.storage.signing import URLSigner
from lanner.teams import permissions

__all__ = ["acceptance", "annotate_view", "editable_dataset", "propose", "save_labels"]
FILTERS = ("unlabelled",)


def editable_dataset(session: Session, principal: Principal, *, owner: str, slug: str,
                     write: bool = False) -> Dataset:
    """A dataset of the caller's own workspace or of a team of theirs (any member reads, ``write`` takes an
    editor: a viewer gets the permission table's 403). Anyone else's, public or not, is answered exactly like a
    missing one: the annotate routes are a workspace's, and a public dataset is read through the image routes."""
    dataset = service.get_dataset(session, principal, owner=owner, slug=slug)
    if not permissions.readable_owner(session, user_id=principal.user_id, owner_id=dataset.owner_id):
        raise NotFound(f"dataset '{owner}/{slug}' not found")
    if write:  # a member: only the role is left to check (no second lookup of the dataset)
        permissions.check(session, user_id=principal.user_id, owner_id=dataset.owner_id, visibility="private",
                          action="write", missing=f"dataset '{owner}/{slug}' not found",
                          read_only=f"dataset '{owner}/{slug}' is read-only for you")
    return dataset


def _item(session: Session, dataset: Dataset, key: str) -> DatasetItem:
    item = session.scalar(select(DatasetItem).where(DatasetItem.manifest_id == dataset.manifest_id,
                                                    DatasetItem.key == key))
    if item is None:
        raise NotFound(f"image '{key}' not found")
    return item


def _neighbours(session: Session, dataset: Dataset, item: DatasetItem, filter: str | None) -> dict[str, str | None]:
    """The previous and next image in the dataset grid's order (name, then key), among unlabelled ones when
    ``filter`` is ``unlabelled`` (no label file and no class: never labelled; a saved empty list is done)."""
    conditions: list[Any] = [DatasetItem.manifest_id == dataset.manifest_id]
    if filter == "unlabelled":
        conditions += [DatasetItem.labels.is_(None), DatasetItem.class_id.is_(None)]
    after = or_(DatasetItem.name > item.name, and_(DatasetItem.name == item.name, DatasetItem.key > item.key))
    before = or_(DatasetItem.name < item.name, and_(DatasetItem.name == item.name, DatasetItem.key < item.key))
    following = session.scalar(select(DatasetItem.key).where(*conditions, after)
                               .order_by(DatasetItem.name, DatasetItem.key).limit(1))
    preceding = session.scalar(select(DatasetItem.key).where(*conditions, before)
                               .order_by(DatasetItem.name.desc(), DatasetItem.key.desc()).limit(1))
    return {"previous": preceding, "next": following}


def annotate_view(session: Session, dataset: Dataset, key: str, *, signer: URLSigner,
                  filter: str | None = None) -> dict[str, Any]:
    """``GET .../annotate/{key}``: everything the editor needs to open one image."""
    if filter is not None and filter not in FILTERS:
        raise BadRequest(f"filter must be one of {', '.join(FILTERS)}")
    item = _item(session, dataset, key)
    blob = session.get(ImageBlob, item.sha256)
    assert blob is not None
    image = {"id": f"{dataset.id}-{item.key}", "key": item.key, "name": item.name, "split": item.split,
             "width": blob.width, "height": blob.height, "url": signer.download_url(item.sha256, item.name),
             "thumbnailUrl": signer.download_url(blob.thumb_sha256, "thumb.jpg") if blob.thumb_sha256 else None}
    return {"image": image, **label_state(item), "task": dataset.task,
            "classNames": [str(n) for n in dataset.class_names or []],
            "kptShape": list(dataset.kpt_shape) if dataset.kpt_shape else None,
            "neighbours": _neighbours(session, dataset, item, filter),
            "suggestions": suggestions(session, dataset, item)}


def suggestions(session: Session, dataset: Dataset, item: DatasetItem) -> list[dict[str, Any]]:
    """Open proposals stored for an image never labelled, newest model first: what a workflow kept of the
    predictions that brought the image in (``lanner.workflows``), shown as proposals, never as labels. Each
    label carries its ``confidence`` when the model gave one."""
    if item.labels is not None or item.class_id is not None:
        return []
    rows = session.scalars(select(LabelProposal).where(
        LabelProposal.dataset_id == dataset.id, LabelProposal.item_key == item.key,
        LabelProposal.resolved_at.is_(None)).order_by(LabelProposal.created_at.desc(), LabelProposal.id.desc())
        .limit(5))
    return [{"model": r.model_ref, "labels": list(r.labels or [])} for r in rows]


def _who(labelled_by: str | None) -> str:
    kind, _, name = (labelled_by or "").partition(":")
    if kind == "user" and name:
        return name
    if kind == "model" and name:
        return f"model {name}"
    return "an import" if kind == "import" else "someone"


def _stale(item: DatasetItem) -> Conflict:
    return Conflict(f"{_who(item.labelled_by)} changed this image since you opened it", code="stale_revision",
                    extra={"current": label_state(item)})


def save_labels(session: Session, principal: Principal, dataset: Dataset, key: str, body: SaveLabels
                ) -> dict[str, Any]:
    """``PUT .../annotate/{key}``: see the module's docstring."""
    item = _item(session, dataset, key)
    if item.last_edit_id == body.editId:
        return label_state(item)  # a retry of the edit already applied
    if item.label_rev != body.revision:
        raise _stale(item)
    labels = items.validate_labels(dataset, body.labels)
    class_id = body.classId
    if dataset.task == "classify":
        if labels:
            raise BadRequest("labels: a classify dataset's image has no objects; send classId")
        n = len(dataset.class_names or [])
        if class_id is not None and n and class_id >= n:
            raise BadRequest(f"classId {class_id} is outside the {n} classes")
        stored: list[dict] | None = None  # as the class-folder importer stores it
    elif class_id is not None:
        raise BadRequest(f"classId is for classify datasets; this one is {dataset.task}: send labels")
    else:
        stored = labels
    manifest = service.writable_manifest(session, dataset)  # may copy: the item is read again from the copy
    item = _item(session, dataset, key)
    claimed = session.execute(update(DatasetItem.__table__).where(
        DatasetItem.__table__.c.manifest_id == manifest, DatasetItem.__table__.c.key == key,
        DatasetItem.__table__.c.label_rev == body.revision).values(label_rev=body.revision))
    if claimed.rowcount != 1:  # another save from the same revision won meanwhile
        session.refresh(item)
        raise _stale(item)
    model_ref = proposals.resolve(session, dataset, key, labels if stored is not None else
                                  ([{"classId": class_id}] if class_id is not None else []))
    by = f"model:{model_ref}" if model_ref else f"user:{principal.username}"
    items.set_labels(dataset, item, stored, by=by, class_id=class_id, edit_id=body.editId)
    session.flush()
    return label_state(item)
