"""``datasets.adopt_images``: images of other datasets added to this one as references to the same stored bytes
(nothing is copied but a row per image), in one transaction.

- Without ``release`` and ``classMapping`` every image comes as an unlabelled train image.
- With either, images of a dataset the caller may change keep their labels, custom fields (``metadata``) and
  split, classes matched by name
  (``classMapping`` renames source classes first; a name the dataset lacks is appended to its classes); images
  of a dataset they may only read still come unlabelled to train, as the SDK documents.
- ``release: true`` moves: the images that came with their labels leave their source in the same transaction.
- An image whose bytes the dataset already holds is skipped; a name already taken in its split gets the source
  image's key appended, so nothing is overwritten.

Every dataset written goes through its private copy of a shared manifest (``service.writable_manifest``), so no
clone or version changes.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets import items, service
from lanner.datasets.models import Dataset, DatasetItem, ImageSelection, ImageSelectionItem
from lanner.db import utcnow
from lanner.errors import BadRequest
from lanner.teams import permissions


def adopt_images(session: Session, principal: Principal, target: Dataset, image_ids: list[str], *,
                 release: bool | None, class_mapping: dict[str, str] | None) -> int:
    """Add the images ``image_ids`` name to ``target`` (which the caller may change); returns how many came."""
    adoption = _Adoption(session, target)
    for dataset_id, keys in items.group_image_ids(image_ids).items():
        if dataset_id == target.id:
            continue  # already here
        source = service.get_dataset_by_id(session, principal, dataset_id)
        adoption.take(principal, source, DatasetItem.key.in_(keys), release=release, class_mapping=class_mapping)
    return adoption.done()


def adopt_selection(session: Session, principal: Principal, target: Dataset, source: Dataset,
                    selection: ImageSelection) -> int:
    """The images of ``selection`` (of ``source``, already checked to be the caller's) copied into ``target``
    with their labels, splits and fields, as ``adopt_images`` with ``release: false`` does: the grid's "Add to"
    bulk action. The selection is read in SQL (a map's lasso may hold 200,000 images)."""
    if source.id == target.id:
        raise BadRequest("these images are already in this dataset: choose another one to add them to")
    chosen = select(ImageSelectionItem.key).where(ImageSelectionItem.selection_id == selection.id)
    adoption = _Adoption(session, target)
    adoption.take(principal, source, DatasetItem.key.in_(chosen), release=False, class_mapping=None)
    return adoption.done()


TARGETS_MAX = 200  # datasets offered per workspace in the "Add these to" list


def targets(session: Session, user: Principal, dataset: Dataset) -> list[dict[str, str]]:
    """The datasets the grid's "Add these to" offers for ``dataset``'s images: the visitor's own and, for a
    team's dataset, the team's, that they may change and whose task is the dataset's (labels fit no other), the
    dataset itself left out. Nothing for a visitor who may not change ``dataset`` (the grid shows them no bulk
    actions): the lists are not read for every viewer's page."""
    if not permissions.can(session, user_id=user.user_id, owner_id=dataset.owner_id, action="write"):
        return []
    owners = dict.fromkeys([service.owner_name(session, dataset), user.username])
    found = []
    for owner in owners:
        for other in service.list_datasets(session, user, owner=owner, limit=TARGETS_MAX):
            if other.id != dataset.id and other.task == dataset.task and permissions.can(
                    session, user_id=user.user_id, owner_id=other.owner_id, action="write"):
                found.append({"value": f"{owner.lower()}/{other.slug}", "label": f"{owner}/{other.name}"})
    return found


class _Adoption:
    """Rows for ``target`` gathered from one source after another, then inserted at once (``done``)."""

    def __init__(self, session: Session, target: Dataset) -> None:
        self.session, self.target = session, target
        self.manifest = service.writable_manifest(session, target)
        self.held = set(session.scalars(select(DatasetItem.sha256).where(DatasetItem.manifest_id == self.manifest)))
        self.taken = {(split, name) for split, name in session.execute(
            select(DatasetItem.split, DatasetItem.name).where(DatasetItem.manifest_id == self.manifest))}
        self.names = list(target.class_names or [])
        self.rows: list[dict[str, Any]] = []

    def take(self, principal: Principal, source: Dataset, chosen: Any, *, release: bool | None,
             class_mapping: dict[str, str] | None) -> None:
        with_labels = release is not None or class_mapping is not None
        labelled = with_labels and permissions.can(self.session, user_id=principal.user_id,
                                                   owner_id=source.owner_id, action="write")
        if labelled:
            _check_compatible(source, self.target, empty=not self.names and not self.held)
        moved = []
        for item in self.session.scalars(select(DatasetItem).where(DatasetItem.manifest_id == source.manifest_id,
                                                                   chosen).order_by(DatasetItem.key)):
            if item.sha256 in self.held:
                continue
            self.held.add(item.sha256)
            split = item.split if labelled else "train"
            name = _free_name(item.name, item.key, split, self.taken)
            labels, class_id = _mapped(source, item, self.names, class_mapping) if labelled else (None, None)
            self.rows.append({"manifest_id": self.manifest, "key": service.new_key(), "name": name, "split": split,
                              "sha256": item.sha256, "labels": labels, "class_id": class_id, "issues": ",",
                              "updated_at": utcnow(), **service.label_fields(labels, class_id),
                              "labelled_by": item.labelled_by if labels is not None or class_id is not None
                              else None, "metadata": item.metadata_ if labelled else None})
            moved.append(item.key)
        if release and labelled and moved:
            items.delete_items(self.session, source, moved)

    def done(self) -> int:
        if self.rows:
            self.session.execute(DatasetItem.__table__.insert(), self.rows)
            self.target.class_names = self.names
            service.touch(self.target)
        return len(self.rows)


def _check_compatible(source: Dataset, target: Dataset, *, empty: bool) -> None:
    """Labels fit only a dataset of the same task (and, for pose, the same keypoints); an empty dataset takes
    the task and keypoint shape of the first labels it receives."""
    if empty:
        target.task, target.kpt_shape = source.task, source.kpt_shape or target.kpt_shape
        return
    if source.task != target.task or (source.task == "pose" and target.kpt_shape
                                      and list(source.kpt_shape or []) != list(target.kpt_shape)):
        what = f"{source.task} labels" + (f" with keypoints {source.kpt_shape}" if source.task == "pose" else "")
        raise BadRequest(f"'{source.slug}' holds {what} that do not fit this {target.task} dataset: adopt its "
                         "images without labels (no release, no classMapping)")
    if source.kpt_shape and not target.kpt_shape:
        target.kpt_shape = source.kpt_shape


def _free_name(name: str, key: str, split: str, taken: set[tuple[str, str]]) -> str:
    """``name``, or with the source key (and a number, if need be) appended when ``split`` already has it."""
    path, suffix = PurePosixPath(name), 0
    while (split, name) in taken:
        suffix += 1
        name = str(path.with_name(f"{path.stem}-{key}{f'-{suffix}' if suffix > 1 else ''}{path.suffix}"))
    taken.add((split, name))
    return name


def _mapped(source: Dataset, item: DatasetItem, names: list[str], class_mapping: dict[str, str] | None
            ) -> tuple[list[dict[str, Any]] | None, int | None]:
    """The item's labels and class with the source's class ids turned into ``names``' (extended as needed)."""
    source_names = [str(n) for n in source.class_names or []]

    def target_id(source_id: int) -> int:
        name = source_names[source_id] if 0 <= source_id < len(source_names) else str(source_id)
        name = (class_mapping or {}).get(name, name)
        if name not in names:
            names.append(name)
        return names.index(name)

    labels = None if item.labels is None else [{**label, "classId": target_id(int(label["classId"]))}
                                               for label in item.labels]
    return labels, target_id(item.class_id) if item.class_id is not None else None
