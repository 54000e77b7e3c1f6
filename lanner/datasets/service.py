"""Datasets: access, copy-on-write manifests, items (images with labels), clone, versions and trash."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from sqlalchemy import case, delete, func, insert, literal, or_, select
from sqlalchemy.orm import Session

from lanner.accounts import service as accounts_service
from lanner.accounts.models import User
from lanner.accounts.service import Principal
from lanner.datasets.models import Dataset, DatasetItem, DatasetVersion, ImageBlob, Manifest
from lanner.datasets.records import SPLITS, TASKS, Label
from lanner.db import utcnow
from lanner.errors import BadRequest, Conflict, Forbidden, NotFound
from lanner.slugs import slugify

TRASH_DAYS = 30
VISIBILITIES = ("public", "private")
_ITEM_COPY_COLUMNS = ("key", "name", "split", "sha256", "labels", "class_id", "label_count", "class_list",
                      "class_mask", "issues", "updated_at")


def new_key() -> str:
    return secrets.token_hex(6)


# --- access --------------------------------------------------------------------------------------

def get_dataset(session: Session, principal: Principal, *, owner: str, slug: str, write: bool = False,
                include_trashed: bool = False) -> Dataset:
    """404 for anything the caller may not see; 403 for writing a public dataset of someone else."""
    dataset = session.scalar(select(Dataset).join(User, User.id == Dataset.owner_id).where(
        User.username == owner.lower(), Dataset.slug == slug))
    visible = dataset is not None and (dataset.owner_id == principal.user_id or dataset.visibility == "public")
    if not visible or (dataset.deleted_at is not None and not include_trashed):  # type: ignore[union-attr]
        raise NotFound(f"dataset '{owner}/{slug}' not found")
    assert dataset is not None
    if write and dataset.owner_id != principal.user_id:
        raise Forbidden(f"dataset '{owner}/{slug}' is public but read-only for you")
    return dataset


def get_dataset_by_id(session: Session, principal: Principal, dataset_id: str, *, write: bool = False) -> Dataset:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None or dataset.deleted_at is not None or not (
            dataset.owner_id == principal.user_id or dataset.visibility == "public"):
        raise NotFound("image not found")
    if write and dataset.owner_id != principal.user_id:
        raise Forbidden("this dataset is public but read-only for you")
    return dataset


def owner_name(session: Session, dataset: Dataset) -> str:
    return session.scalar(select(User.username).where(User.id == dataset.owner_id)) or ""


def list_datasets(session: Session, principal: Principal, *, owner: str, limit: int | None = None) -> list[Dataset]:
    user = accounts_service.get_user_by_username(session, username=owner)
    if user is None:
        raise NotFound(f"workspace '{owner}' not found")
    query = select(Dataset).where(Dataset.owner_id == user.id, Dataset.deleted_at.is_(None)).order_by(
        Dataset.created_at.desc())
    if user.id != principal.user_id:
        query = query.where(Dataset.visibility == "public")
    if limit:
        query = query.limit(limit)
    return list(session.scalars(query))


def create_dataset(session: Session, principal: Principal, *, name: str, slug: str | None = None,
                   owner: str | None = None, description: str = "", visibility: str = "private",
                   task: str | None = None, class_names: list[str] | None = None, tags: list[str] | None = None,
                   license: str | None = None, metadata: dict[str, Any] | None = None) -> Dataset:
    if owner and owner.lower() != principal.username:
        raise NotFound(f"workspace '{owner}' not found")
    if visibility not in VISIBILITIES:
        raise BadRequest(f"visibility must be one of {', '.join(VISIBILITIES)}")
    if task is not None and task not in TASKS:
        raise BadRequest(f"task must be one of {', '.join(TASKS)}")
    slug = slugify(slug or name)
    if not slug:
        raise BadRequest("dataset name must contain at least one letter or digit")
    if session.scalar(select(Dataset.id).where(Dataset.owner_id == principal.user_id, Dataset.slug == slug)):
        raise Conflict(f"dataset '{principal.username}/{slug}' already exists")
    manifest = Manifest()
    session.add(manifest)
    session.flush()
    dataset = Dataset(owner_id=principal.user_id, slug=slug, name=name or slug, description=description or "",
                      visibility=visibility, task=task or "detect", class_names=list(class_names or []),
                      tags=list(tags or []), license=license, metadata_=metadata or {}, manifest_id=manifest.id,
                      status="ready")
    session.add(dataset)
    session.flush()
    return dataset


def touch(dataset: Dataset) -> None:
    """Every content change bumps the revision: exports and health reports are keyed by it."""
    dataset.revision = (dataset.revision or 0) + 1
    dataset.updated_at = utcnow()


# --- copy-on-write manifests ---------------------------------------------------------------------

def manifest_is_shared(session: Session, manifest_id: int, *, dataset_id: str) -> bool:
    other_datasets = session.scalar(select(func.count()).select_from(Dataset).where(
        Dataset.manifest_id == manifest_id, Dataset.id != dataset_id)) or 0
    versions = session.scalar(select(func.count()).select_from(DatasetVersion).where(
        DatasetVersion.manifest_id == manifest_id)) or 0
    return bool(other_datasets or versions)


def copy_manifest(session: Session, manifest_id: int) -> int:
    new = Manifest()
    session.add(new)
    session.flush()
    columns = [getattr(DatasetItem, c) for c in _ITEM_COPY_COLUMNS]
    session.execute(insert(DatasetItem).from_select(
        ["manifest_id", *_ITEM_COPY_COLUMNS],
        select(literal(new.id), *columns).where(DatasetItem.manifest_id == manifest_id),
    ))
    return new.id


def writable_manifest(session: Session, dataset: Dataset) -> int:
    """The dataset's manifest, copied first if a clone or a version shares it (copy-on-write)."""
    if dataset.status == "processing":
        raise Conflict("the dataset is processing an import; edit it when the import has finished")
    if manifest_is_shared(session, dataset.manifest_id, dataset_id=dataset.id):
        dataset.manifest_id = copy_manifest(session, dataset.manifest_id)
        session.flush()
    return dataset.manifest_id


def drop_manifest_if_orphan(session: Session, manifest_id: int) -> None:
    used = session.scalar(select(func.count()).select_from(Dataset).where(Dataset.manifest_id == manifest_id)) or 0
    used += session.scalar(select(func.count()).select_from(DatasetVersion).where(
        DatasetVersion.manifest_id == manifest_id)) or 0
    if not used:
        session.execute(delete(DatasetItem).where(DatasetItem.manifest_id == manifest_id))
        session.execute(delete(Manifest).where(Manifest.id == manifest_id))


# --- items ---------------------------------------------------------------------------------------

def label_fields(labels: list[dict] | None, class_id: int | None) -> dict[str, Any]:
    """Derived columns kept beside the labels so filters and counts never parse JSON."""
    ids = sorted({int(lbl["classId"]) for lbl in labels or []} | ({class_id} if class_id is not None else set()))
    return {"label_count": len(labels or []), "class_list": "," + "".join(f"{i}," for i in ids),
            "class_mask": class_mask(ids)}


MASK_CLASSES = 63  # bits of a signed 64-bit integer usable on SQLite and PostgreSQL alike


def class_mask(ids: Iterable[int]) -> int:
    return sum(1 << i for i in set(ids) if 0 <= i < MASK_CLASSES)


def image_id(dataset: Dataset, item: DatasetItem) -> str:
    return f"{dataset.id}-{item.key}"


def split_image_id(value: str) -> tuple[str, str]:
    dataset_id, sep, key = value.rpartition("-")
    if not sep or not dataset_id or not key:
        raise NotFound(f"image '{value}' not found")
    return dataset_id, key


def get_item(session: Session, dataset: Dataset, key: str) -> DatasetItem:
    item = session.scalar(select(DatasetItem).where(DatasetItem.manifest_id == dataset.manifest_id,
                                                    DatasetItem.key == key))
    if item is None:
        raise NotFound("image not found")
    return item


def resolve_image(session: Session, principal: Principal, value: str, *, write: bool = False,
                  ) -> tuple[Dataset, DatasetItem]:
    dataset_id, key = split_image_id(value)
    dataset = get_dataset_by_id(session, principal, dataset_id, write=write)
    if write:
        writable_manifest(session, dataset)
    return dataset, get_item(session, dataset, key)


def validate_labels(dataset: Dataset, labels: Any) -> list[dict]:
    if not isinstance(labels, list):
        raise BadRequest("labels must be a list")
    out = []
    n_classes = len(dataset.class_names or [])
    for i, raw in enumerate(labels):
        if not isinstance(raw, dict) or not isinstance(raw.get("classId"), int) or isinstance(raw["classId"], bool):
            raise BadRequest(f"labels[{i}].classId must be an integer")
        if not 0 <= raw["classId"] < max(n_classes, 1) and n_classes:
            raise BadRequest(f"labels[{i}].classId {raw['classId']} is outside the {n_classes} classes")
        label: dict[str, Any] = {"classId": raw["classId"]}
        for key, size in (("bbox", 4), ("segments", None), ("keypoints", None), ("obb", 8)):
            value = raw.get(key)
            if value is None:
                continue
            if not isinstance(value, list) or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                                      for v in value):
                raise BadRequest(f"labels[{i}].{key} must be a list of numbers")
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


def set_labels(session: Session, dataset: Dataset, item: DatasetItem, labels: list[dict]) -> None:
    item.labels = labels
    for field, value in label_fields(labels, item.class_id).items():
        setattr(item, field, value)
    item.updated_at = utcnow()
    touch(dataset)


def delete_items(session: Session, dataset: Dataset, keys: Iterable[str]) -> list[str]:
    keys = list(dict.fromkeys(keys))
    manifest = writable_manifest(session, dataset)
    found = list(session.scalars(select(DatasetItem.key).where(DatasetItem.manifest_id == manifest,
                                                               DatasetItem.key.in_(keys))))
    if found:
        session.execute(delete(DatasetItem).where(DatasetItem.manifest_id == manifest, DatasetItem.key.in_(found)))
        touch(dataset)
    return found


def move_items(session: Session, dataset: Dataset, keys: Iterable[str], split: str) -> tuple[int, int]:
    """Returns (modified, skipped): an item already in ``split``, or whose name is taken there, is skipped."""
    if split not in SPLITS:
        raise BadRequest(f"split must be one of {', '.join(SPLITS)}")
    manifest = writable_manifest(session, dataset)
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
        touch(dataset)
    return modified, skipped


def counts(session: Session, manifest_id: int) -> dict[str, int]:
    labeled = case((or_(DatasetItem.label_count > 0, DatasetItem.class_id.is_not(None),
                        DatasetItem.labels.is_not(None)), 1), else_=0)
    rows = session.execute(select(DatasetItem.split, func.count(), func.sum(DatasetItem.label_count),
                                  func.sum(labeled))
                           .where(DatasetItem.manifest_id == manifest_id).group_by(DatasetItem.split))
    out = {"train": 0, "val": 0, "test": 0, "labeled": 0, "images": 0, "annotations": 0}
    for split, n, n_labels, n_labeled in rows:
        out[split] = int(n)
        out["images"] += int(n)
        out["annotations"] += int(n_labels or 0)
        out["labeled"] += int(n_labeled or 0)
    return out


def total_bytes(session: Session, manifest_id: int) -> int:
    return int(session.scalar(select(func.coalesce(func.sum(ImageBlob.size), 0)).join(
        DatasetItem, DatasetItem.sha256 == ImageBlob.sha256).where(DatasetItem.manifest_id == manifest_id)) or 0)


# --- classes -------------------------------------------------------------------------------------

def _remap_items(session: Session, dataset: Dataset, mapping: dict[int, int | None]) -> int:
    """Rewrite class ids of every label (``None`` drops the label); returns labels dropped."""
    manifest = writable_manifest(session, dataset)
    dropped = 0
    for item in session.scalars(select(DatasetItem).where(DatasetItem.manifest_id == manifest)):
        changed = False
        if item.labels:
            new_labels = []
            for label in item.labels:
                target = mapping.get(int(label["classId"]), int(label["classId"]))
                if target is None:
                    dropped += 1
                    changed = True
                    continue
                if target != label["classId"]:
                    label = {**label, "classId": target}
                    changed = True
                new_labels.append(label)
            item.labels = new_labels
        if item.class_id is not None and item.class_id in mapping:
            item.class_id = mapping[item.class_id]
            changed = True
        if changed:
            for field, value in label_fields(item.labels, item.class_id).items():
                setattr(item, field, value)
            item.updated_at = utcnow()
    touch(dataset)
    return dropped


def _check_class_ids(dataset: Dataset, ids: Iterable[int]) -> list[int]:
    ids = sorted(set(ids))
    n = len(dataset.class_names or [])
    bad = [i for i in ids if not isinstance(i, int) or not 0 <= i < n]
    if bad or not ids:
        raise BadRequest(f"class ids {bad or ids} are not among the dataset's {n} classes")
    return ids


def merge_classes(session: Session, dataset: Dataset, sources: list[int], target: int) -> list[int]:
    _check_class_ids(dataset, [*sources, target])
    sources = sorted(set(sources) - {target})
    if not sources:
        raise BadRequest("nothing to merge: give source classes other than the target")
    return _drop_classes(session, dataset, sources, merge_into=target)[0]


def delete_classes(session: Session, dataset: Dataset, ids: list[int]) -> tuple[list[int], int]:
    ids = _check_class_ids(dataset, ids)
    return _drop_classes(session, dataset, ids, merge_into=None)


def _drop_classes(session: Session, dataset: Dataset, ids: list[int], merge_into: int | None
                  ) -> tuple[list[int], int]:
    """Remove classes ``ids`` from the class list and renumber the rest densely (YOLO needs 0..N-1)."""
    names = list(dataset.class_names or [])
    kept = [i for i in range(len(names)) if i not in ids]
    renumber = {old: new for new, old in enumerate(kept)}
    mapping: dict[int, int | None] = {}
    for old in range(len(names)):
        if old in ids:
            mapping[old] = renumber[merge_into] if merge_into is not None else None
        else:
            mapping[old] = renumber[old]
    dropped = _remap_items(session, dataset, mapping)
    dataset.class_names = [names[i] for i in kept]
    return ids, dropped


# --- splits --------------------------------------------------------------------------------------

def redistribute(session: Session, dataset: Dataset, ratios: dict[str, float], seed: int = 0) -> tuple[dict, int]:
    """Reassign splits by ratio, seeded and stratified by each image's rarest class (so rare classes reach val)."""
    import random

    total = sum(ratios.values())
    if total <= 0 or any(v < 0 for v in ratios.values()):
        raise BadRequest("split ratios must be non-negative and not all zero")
    shares = {s: ratios.get(s, 0.0) / total for s in SPLITS}
    manifest = writable_manifest(session, dataset)
    items = list(session.scalars(select(DatasetItem).where(DatasetItem.manifest_id == manifest)
                                 .order_by(DatasetItem.key)))
    frequency: dict[int, int] = {}
    for item in items:
        for cid in _classes_of(item):
            frequency[cid] = frequency.get(cid, 0) + 1
    strata: dict[int, list[DatasetItem]] = {}
    for item in items:
        ids = _classes_of(item)
        stratum = min(ids, key=lambda c: (frequency[c], c)) if ids else -1
        strata.setdefault(stratum, []).append(item)
    rng = random.Random(seed)
    assignment: dict[int, str] = {}
    for stratum in sorted(strata):
        group = strata[stratum]
        rng.shuffle(group)
        n = len(group)
        n_val = round(n * shares["val"])
        n_test = round(n * shares["test"])
        if shares["val"] > 0 and n_val == 0 and n >= 2:
            n_val = 1
        n_train = max(0, n - n_val - n_test)
        for i, item in enumerate(group):
            assignment[item.id] = "train" if i < n_train else "val" if i < n_train + n_val else "test"
    # Names must stay unique per split: move in two passes through a temporary split name.
    modified = 0
    for item in items:
        if assignment[item.id] != item.split:
            item.split = f"~{item.id}"
            modified += 1
    session.flush()
    for item in items:
        if item.split.startswith("~"):
            item.split, item.updated_at = assignment[item.id], utcnow()
    session.flush()
    clashes = session.execute(select(DatasetItem.split, DatasetItem.name, func.count()).where(
        DatasetItem.manifest_id == manifest).group_by(DatasetItem.split, DatasetItem.name).having(func.count() > 1))
    if clashes.first():
        raise Conflict("two images with the same name would land in one split")
    if modified:
        touch(dataset)
    result = {s: sum(1 for v in assignment.values() if v == s) for s in SPLITS}
    return result, modified


def _classes_of(item: DatasetItem) -> list[int]:
    return [int(c) for c in item.class_list.strip(",").split(",") if c]


# --- clone, versions, trash ----------------------------------------------------------------------

def clone_dataset(session: Session, principal: Principal, source: Dataset, *, name: str | None = None,
                  slug: str | None = None, description: str | None = None, visibility: str = "private") -> Dataset:
    """O(1): the clone shares the source's manifest until either side writes (copy-on-write)."""
    base = slugify(slug or name or f"{source.slug}-clone")
    taken = set(session.scalars(select(Dataset.slug).where(Dataset.owner_id == principal.user_id,
                                                           Dataset.slug.like(f"{base}%"))))
    if slug and base in taken:
        raise Conflict(f"dataset '{principal.username}/{base}' already exists")
    from lanner.slugs import unique_slug

    base = unique_slug(base, taken)
    clone = Dataset(owner_id=principal.user_id, slug=base, name=name or base,
                    description=source.description if description is None else description,
                    visibility=visibility if visibility in VISIBILITIES else "private", task=source.task,
                    class_names=list(source.class_names or []), kpt_shape=source.kpt_shape, format=source.format,
                    tags=list(source.tags or []), license=source.license, metadata_=dict(source.metadata_ or {}),
                    cloned_from_id=source.id, manifest_id=source.manifest_id, status="ready", revision=0)
    session.add(clone)
    session.flush()
    return clone


def content_hash(session: Session, manifest_id: int, class_names: list[str]) -> str:
    digest = hashlib.sha256(repr(class_names).encode())
    rows = session.execute(select(DatasetItem.split, DatasetItem.name, DatasetItem.sha256, DatasetItem.labels,
                                  DatasetItem.class_id).where(DatasetItem.manifest_id == manifest_id)
                           .order_by(DatasetItem.split, DatasetItem.name))
    for row in rows:
        digest.update(repr(tuple(row)).encode())
    return digest.hexdigest()


def create_version(session: Session, dataset: Dataset, description: str = "") -> tuple[DatasetVersion, bool]:
    """Freeze the current manifest (O(1): the dataset copies on its next write). Unchanged content reuses the
    latest version instead of making an identical one."""
    latest = session.scalar(select(DatasetVersion).where(DatasetVersion.dataset_id == dataset.id)
                            .order_by(DatasetVersion.version.desc()).limit(1))
    if latest is not None and latest.source_revision == dataset.revision:
        return latest, True
    stats = counts(session, dataset.manifest_id)
    version = DatasetVersion(
        dataset_id=dataset.id, version=(latest.version + 1) if latest else 1, description=description or "",
        manifest_id=dataset.manifest_id, class_names=list(dataset.class_names or []), task=dataset.task,
        stats={**stats, "bytes": total_bytes(session, dataset.manifest_id)},
        content_hash=content_hash(session, dataset.manifest_id, list(dataset.class_names or [])),
        source_revision=dataset.revision,
    )
    session.add(version)
    session.flush()
    return version, False


def get_version(session: Session, dataset: Dataset, number: int) -> DatasetVersion:
    version = session.scalar(select(DatasetVersion).where(DatasetVersion.dataset_id == dataset.id,
                                                          DatasetVersion.version == number))
    if version is None:
        raise NotFound(f"dataset version {number} not found")
    return version


def list_versions(session: Session, dataset: Dataset) -> list[DatasetVersion]:
    return list(session.scalars(select(DatasetVersion).where(DatasetVersion.dataset_id == dataset.id)
                                .order_by(DatasetVersion.version)))


def restore_version(session: Session, dataset: Dataset, number: int) -> DatasetVersion:
    version = get_version(session, dataset, number)
    old = dataset.manifest_id
    dataset.manifest_id = version.manifest_id  # shared with the version: the next write copies it
    dataset.class_names = list(version.class_names)
    dataset.task = version.task
    touch(dataset)
    session.flush()
    drop_manifest_if_orphan(session, old)
    return version


def compare_manifests(session: Session, base: int, head: int) -> list[dict[str, Any]]:
    """Added, removed, modified (labels changed) and moved (split changed) images between two manifests."""
    def load(manifest_id: int) -> dict[str, tuple]:
        rows = session.execute(select(DatasetItem.key, DatasetItem.name, DatasetItem.split, DatasetItem.sha256,
                                      DatasetItem.labels, DatasetItem.label_count, DatasetItem.class_id)
                               .where(DatasetItem.manifest_id == manifest_id))
        return {r.key: tuple(r) for r in rows}

    old, new = load(base), load(head)
    changes = []
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        ref = b or a
        assert ref is not None
        entry: dict[str, Any] = {"hash": ref[3], "name": ref[1], "ext": ref[1].rsplit(".", 1)[-1].lower()}
        if a is None:
            change, fields, added, removed = "added", [], b[5], 0  # type: ignore[index]
        elif b is None:
            change, fields, added, removed = "removed", [], 0, a[5]
        else:
            fields = []
            if (a[4] or []) != (b[4] or []) or a[6] != b[6]:
                fields.append("labels")
            if a[1] != b[1]:
                fields.append("name")
            if a[3] != b[3]:
                fields.append("size")
            if not fields and a[2] == b[2]:
                continue
            change = "modified" if fields else "moved"
            added, removed = _label_delta(a[4] or [], b[4] or [])
        entry.update(change=change, fields=fields, labelsAdded=added, labelsRemoved=removed)
        if a is not None:
            entry["base"] = {"split": a[2], "labelCount": a[5]}
        if b is not None:
            entry["head"] = {"split": b[2], "labelCount": b[5]}
        changes.append(entry)
    return changes


def _label_delta(old: list[dict], new: list[dict]) -> tuple[int, int]:
    def key(label: dict) -> str:
        return repr(sorted(label.items()))

    before, after = [key(x) for x in old], [key(x) for x in new]
    remaining = list(before)
    added = 0
    for k in after:
        if k in remaining:
            remaining.remove(k)
        else:
            added += 1
    return added, len(remaining)


def trash_dataset(session: Session, dataset: Dataset) -> None:
    dataset.deleted_at = utcnow()
    # The slug stays taken while in trash, so a restore never collides.


def restore_dataset(session: Session, dataset: Dataset) -> None:
    if dataset.deleted_at is None:
        raise Conflict("dataset is not in the trash")
    dataset.deleted_at = None


def purge_dataset(session: Session, dataset: Dataset) -> None:
    manifests = {dataset.manifest_id, *session.scalars(select(DatasetVersion.manifest_id).where(
        DatasetVersion.dataset_id == dataset.id))}
    session.delete(dataset)
    session.flush()
    for manifest_id in manifests:
        drop_manifest_if_orphan(session, manifest_id)


def trashed(session: Session, principal: Principal) -> list[Dataset]:
    return list(session.scalars(select(Dataset).where(Dataset.owner_id == principal.user_id,
                                                      Dataset.deleted_at.is_not(None))
                                .order_by(Dataset.deleted_at.desc())))


def purge_expired(session: Session) -> int:
    cutoff = utcnow() - timedelta(days=TRASH_DAYS)
    expired = list(session.scalars(select(Dataset).where(Dataset.deleted_at.is_not(None),
                                                         Dataset.deleted_at < cutoff)))
    for dataset in expired:
        purge_dataset(session, dataset)
    return len(expired)


def search_public(session: Session, *, q: str | None, task: str | None, limit: int, offset: int) -> list[Dataset]:
    query = select(Dataset).where(Dataset.visibility == "public", Dataset.deleted_at.is_(None))
    if q:
        pattern = f"%{q.lower()}%"
        query = query.where(or_(func.lower(Dataset.name).like(pattern), Dataset.slug.like(pattern),
                                func.lower(Dataset.description).like(pattern)))
    if task:
        query = query.where(Dataset.task == task)
    return list(session.scalars(query.order_by(Dataset.updated_at.desc()).offset(offset).limit(limit)))


def labels_to_records(labels: list[dict] | None) -> list[Label] | None:
    return None if labels is None else [Label.from_json(x) for x in labels]
