"""Edits of a dataset as a whole: merging and deleting classes (labels are renumbered densely, as YOLO needs
0..N-1) and redistributing images over the splits. Each edit writes a private copy of a shared manifest first."""

from __future__ import annotations

import random
from collections.abc import Iterable

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.datasets import service
from lanner.datasets.models import Dataset, DatasetItem
from lanner.datasets.records import SPLITS
from lanner.db import utcnow
from lanner.errors import BadRequest, Conflict

# --- classes -------------------------------------------------------------------------------------

def _remap_items(session: Session, dataset: Dataset, mapping: dict[int, int | None]) -> int:
    """Rewrite class ids of every label (``None`` drops the label); returns labels dropped."""
    manifest = service.writable_manifest(session, dataset)
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
            for field, value in service.label_fields(item.labels, item.class_id).items():
                setattr(item, field, value)
            item.updated_at = utcnow()
            item.label_rev = (item.label_rev or 0) + 1  # an editor holding the old numbering must reload
    service.touch(dataset)
    return dropped


def _check_class_ids(dataset: Dataset, ids: Iterable[int]) -> list[int]:
    ids = sorted(set(ids))
    n = len(dataset.class_names or [])
    bad = [i for i in ids if not isinstance(i, int) or not 0 <= i < n]
    if bad or not ids:
        raise BadRequest(f"class ids {bad or ids} are not among the dataset's {n} classes")
    return ids


def merge_classes(session: Session, dataset: Dataset, sources: list[int], target: int) -> tuple[list[int], int]:
    """Fold classes ``sources`` into ``target``; returns the merged ids and the target's id after renumbering."""
    _check_class_ids(dataset, [*sources, target])
    target_name = (dataset.class_names or [])[target]
    sources = sorted(set(sources) - {target})
    if not sources:
        raise BadRequest("nothing to merge: give source classes other than the target")
    merged = _drop_classes(session, dataset, sources, merge_into=target)[0]
    names = list(dataset.class_names or [])
    return merged, names.index(target_name) if target_name in names else target


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
    total = sum(ratios.values())
    if total <= 0 or any(v < 0 for v in ratios.values()):
        raise BadRequest("split ratios must be non-negative and not all zero")
    shares = {s: ratios.get(s, 0.0) / total for s in SPLITS}
    manifest = service.writable_manifest(session, dataset)
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
        service.touch(dataset)
    result = {s: sum(1 for v in assignment.values() if v == s) for s in SPLITS}
    return result, modified


def _classes_of(item: DatasetItem) -> list[int]:
    return [int(c) for c in item.class_list.strip(",").split(",") if c]
