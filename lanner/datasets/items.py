"""Images of a dataset, one by one or in bulk: ids, label edits, deletes and split moves. Every write goes to the
dataset's private copy of a shared manifest (``service.writable_manifest``), so clones and versions never change."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.bounds import INT32_MAX
from lanner.datasets import service
from lanner.datasets.models import Dataset, DatasetItem
from lanner.datasets.records import SPLITS
from lanner.db import iso, utcnow
from lanner.errors import BadRequest, NotFound

METADATA_MAX_KEYS = 100
METADATA_MAX_BYTES = 16 * 1024


def split_image_id(value: str) -> tuple[str, str]:
    """An image id is ``<dataset id>-<item key>``: the key survives copy-on-write, so ids stay stable."""
    dataset_id, sep, key = value.rpartition("-")
    if not sep or not dataset_id or not key:
        raise NotFound(f"image '{value}' not found")
    return dataset_id, key


def group_image_ids(ids: Iterable[str]) -> dict[str, list[str]]:
    """Image ids grouped by dataset id: bulk endpoints check access once per dataset."""
    grouped: dict[str, list[str]] = {}
    for value in ids:
        dataset_id, key = split_image_id(value)
        grouped.setdefault(dataset_id, []).append(key)
    return grouped


def resolve_image(session: Session, principal: Principal, value: str, *, write: bool = False,
                  ) -> tuple[Dataset, DatasetItem]:
    dataset_id, key = split_image_id(value)
    dataset = service.get_dataset_by_id(session, principal, dataset_id, write=write)
    if write:
        service.writable_manifest(session, dataset)
    item = session.scalar(select(DatasetItem).where(DatasetItem.manifest_id == dataset.manifest_id,
                                                    DatasetItem.key == key))
    if item is None:
        raise NotFound("image not found")
    return dataset, item


def validate_labels(dataset: Dataset, labels: Any) -> list[dict]:
    if not isinstance(labels, list):
        raise BadRequest("labels must be a list")
    out = []
    n_classes = len(dataset.class_names or [])
    for i, raw in enumerate(labels):
        if not isinstance(raw, dict) or not isinstance(raw.get("classId"), int) or isinstance(raw["classId"], bool):
            raise BadRequest(f"labels[{i}].classId must be an integer")
        if not 0 <= raw["classId"] < (n_classes or INT32_MAX + 1):  # no class names yet: any id a column holds
            raise BadRequest(f"labels[{i}].classId {raw['classId']} is outside the "
                             f"{n_classes or 'possible'} classes")
        label: dict[str, Any] = {"classId": raw["classId"]}
        for key, size in (("bbox", 4), ("segments", None), ("keypoints", None), ("obb", 8)):
            value = raw.get(key)
            if value is None:
                continue
            if not isinstance(value, list) or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                                      and math.isfinite(v) for v in value):
                raise BadRequest(f"labels[{i}].{key} must be a list of finite numbers")
            if size and len(value) != size:
                raise BadRequest(f"labels[{i}].{key} must have {size} numbers")
            coords = value if key != "keypoints" else [v for j, v in enumerate(value) if j % 3 != 2]
            if any(v < -1e-3 or v > 1 + 1e-3 for v in coords):
                raise BadRequest(f"labels[{i}].{key} has coordinates outside [0, 1]")
            label[key] = [float(v) for v in value]
        if dataset.task != "classify" and not any(k in label for k in ("bbox", "segments", "obb")):
            raise BadRequest(f"labels[{i}] needs a bbox, segments or obb")
        out.append(label)
    return out


def set_labels(dataset: Dataset, item: DatasetItem, labels: list[dict] | None, *, by: str,
               class_id: int | None = None, edit_id: str | None = None) -> None:
    """Replace an image's labels (and, for classify, its class), as the importers store them. Every path that
    changes labels comes here or bumps ``label_rev`` itself (``edits``), so a save that started from an older
    revision is refused (``lanner.annotation``). ``by`` is who labelled it: ``user:<name>`` or ``model:<ref>``."""
    item.labels = labels
    if class_id is not None or dataset.task == "classify":
        item.class_id = class_id
    for field, value in service.label_fields(labels, item.class_id).items():
        setattr(item, field, value)
    item.updated_at = item.labelled_at = utcnow()
    item.label_rev = (item.label_rev or 0) + 1
    item.labelled_by = by[:300]
    item.last_edit_id = edit_id
    service.touch(dataset)


def delete_items(session: Session, dataset: Dataset, keys: Iterable[str]) -> list[str]:
    keys = list(dict.fromkeys(keys))
    manifest = service.writable_manifest(session, dataset)
    found = list(session.scalars(select(DatasetItem.key).where(DatasetItem.manifest_id == manifest,
                                                               DatasetItem.key.in_(keys))))
    if found:
        session.execute(delete(DatasetItem).where(DatasetItem.manifest_id == manifest, DatasetItem.key.in_(found)))
        service.touch(dataset)
    return found


def move_items(session: Session, dataset: Dataset, keys: Iterable[str], split: str) -> tuple[int, int]:
    """Returns (modified, skipped): an item already in ``split``, or whose name is taken there, is skipped."""
    if split not in SPLITS:
        raise BadRequest(f"split must be one of {', '.join(SPLITS)}")
    manifest = service.writable_manifest(session, dataset)
    items = list(session.scalars(select(DatasetItem).where(DatasetItem.manifest_id == manifest,
                                                           DatasetItem.key.in_(list(keys)))))
    taken = set(session.scalars(select(DatasetItem.name).where(DatasetItem.manifest_id == manifest,
                                                               DatasetItem.split == split)))
    modified = skipped = 0
    for item in items:
        if item.split == split or item.name in taken:
            skipped += 1
            continue
        item.split, item.updated_at = split, utcnow()
        taken.add(item.name)
        modified += 1
    if modified:
        service.touch(dataset)
    return modified, skipped


def delete_image(session: Session, principal: Principal, image_id: str) -> int:
    """``images.delete``: 404 for an image the caller cannot see; returns how many were deleted (1)."""
    dataset, item = resolve_image(session, principal, image_id, write=True)
    return len(delete_items(session, dataset, [item.key]))


def delete_images(session: Session, principal: Principal, image_ids: Iterable[str]) -> list[str]:
    """``images.bulk_delete``: the ids of the images deleted (ids not found are left out)."""
    deleted: list[str] = []
    for dataset_id, keys in group_image_ids(image_ids).items():
        dataset = service.get_dataset_by_id(session, principal, dataset_id, write=True)
        deleted += [f"{dataset_id}-{k}" for k in delete_items(session, dataset, keys)]
    return deleted


def move_images(session: Session, principal: Principal, image_ids: Iterable[str], split: str) -> tuple[int, int]:
    """``images.bulk_update``: (modified, skipped) over every dataset the ids name."""
    modified = skipped = 0
    for dataset_id, keys in group_image_ids(image_ids).items():
        dataset = service.get_dataset_by_id(session, principal, dataset_id, write=True)
        m, s = move_items(session, dataset, keys, split)
        modified, skipped = modified + m, skipped + s
    return modified, skipped


def update_image(session: Session, principal: Principal, image_id: str, changes: Mapping[str, Any]
                 ) -> dict[str, Any]:
    """``images.update``: replace an image's labels (``{labels}``: answered with them as stored) or its custom
    fields (``{metadata}``: answered with them and the time)."""
    dataset, item = resolve_image(session, principal, image_id, write=True)  # 404/403 before any body check
    if ("labels" in changes) == ("metadata" in changes):
        raise BadRequest("send {labels: [...]} to replace an image's labels or {metadata: {...}} to replace its "
                         "custom fields, one of the two")
    if "metadata" in changes:
        item.metadata_ = checked_metadata(changes["metadata"]) or None
        item.updated_at = utcnow()
        service.touch(dataset)
        return {"metadata": item.metadata_ or {}, "updatedAt": iso(item.updated_at)}
    labels = validate_labels(dataset, changes["labels"])
    set_labels(dataset, item, labels, by=f"user:{principal.username}", class_id=item.class_id)
    return {"success": True, "labels": labels, "labelCount": len(labels)}


def checked_metadata(value: Any) -> dict[str, Any]:
    """An object of at most ``METADATA_MAX_KEYS`` keys that serialises to at most ``METADATA_MAX_BYTES``: custom
    fields are for a few facts per image (where, when, which camera), not files."""
    if not isinstance(value, dict):
        raise BadRequest("metadata must be a JSON object, e.g. {\"location\": \"strasbourg\"}")
    if len(value) > METADATA_MAX_KEYS:
        raise BadRequest(f"metadata may have at most {METADATA_MAX_KEYS} keys")
    if len(orjson.dumps(value)) > METADATA_MAX_BYTES:
        raise BadRequest(f"metadata may be at most {METADATA_MAX_BYTES} bytes as JSON")
    return dict(value)
