"""The dataset page's map (``web.map_pages``): the whole map in one columnar answer, and where a map not drawable
yet stands (no embeddings, embedding, the layout being computed).

``datasets.clustering`` serves the same layout in pages of one object per image, for SDK clients; the browser
draws up to 200,000 points and needs them all at once: one object per image is ~250 bytes of JSON and a
Python dict each (seconds of encoding for 100,000 images), columns of numbers are ~40 bytes an image and one
``json.dumps`` of lists. Both read the stored layout through ``maps`` (computed once per analysis).

Colour-by fields are a list: a ``category`` field (names + a code per point) or a ``number`` field (a value per
point + its unit), so a per-image score (uniqueness, a model's confidence) is one more entry of ``fields``."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.datasets.records import SPLITS
from lanner.db import iso
from lanner.embeddings import maps, schemas
from lanner.embeddings.service import active_job
from lanner.errors import Conflict

MAX_POINTS = 200_000


def _category(name: str, label: str, names: list[str], codes: list[int]) -> dict[str, Any]:
    return {"name": name, "label": label, "kind": "category", "names": names, "codes": codes}


def _number(name: str, label: str, unit: str, values: list[float]) -> dict[str, Any]:
    return {"name": name, "label": label, "kind": "number", "unit": unit, "values": values}


def _fields(dataset: Dataset, rows: list[Any], cluster: np.ndarray) -> list[dict[str, Any]]:
    """Each point's colour-by values, in ``rows``' order."""
    names = list(dataset.class_names or [])
    several, unlabelled = len(names), len(names) + 1
    splits = {s: n for n, s in enumerate(SPLITS)}
    classes, labelled = [], []
    for row in rows:
        present = [c for c in row.class_list.strip(",").split(",") if c]
        classes.append(int(present[0]) if len(present) == 1 and int(present[0]) < len(names)
                       else several if present else unlabelled)
        labelled.append(0 if row.label_count > 0 or row.class_id is not None else 1)
    clusters = int(cluster.max()) + 1 if cluster.size else 0
    return [
        _category("cluster", "Cluster", [f"Cluster {n + 1}" for n in range(clusters)], cluster.tolist()),
        _category("split", "Split", [*SPLITS, "none"], [splits.get(r.split, len(SPLITS)) for r in rows]),
        _category("class", "Class", [*names, "Several classes", "No class"], classes),
        _category("labelled", "Label status", ["Labelled", "Unlabelled"], labelled),
        _number("labels", "Labels", "labels per image", [int(r.label_count) for r in rows]),
        _number("size", "File size", "KiB", [round(int(r.size) / 1024, 1) for r in rows]),
    ]


def _progress(session: Session, dataset: Dataset) -> dict[str, Any] | None:
    job = active_job(session, dataset)
    return schemas.active_job(job) if job is not None else None


def points(session: Session, principal: Principal, settings: Settings, *, owner: str, slug: str
           ) -> tuple[dict[str, Any], bool]:
    """The map of ``owner/slug`` for the page, and whether the caller must commit and wake the embedding queue
    (a large dataset's layout was asked for). ``state``: ``none`` (no embeddings: the page offers to compute
    them), ``embedding`` (the job's ``progress``), ``computing`` (the layout), ``failed`` (it is computed
    again) or ``ready`` (``keys``, ``x``, ``y``, ``fields``; ``analysing`` when a newer analysis runs)."""
    dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slug)
    body: dict[str, Any] = {"classes": list(dataset.class_names or []), "job": _progress(session, dataset)}
    try:
        row, newer = maps._ready_layout(session, settings, dataset, owner, slug)
    except Conflict as refused:
        state = {"no_embeddings": "embedding" if body["job"] else "none", "map_pending": "computing"}.get(
            refused.code or "", "failed")
        return {**body, "state": state, "message": refused.message}, False
    if row is None:
        return {**body, "state": "computing", "message": "the map of this dataset is being computed"}, True
    drawn = maps._points(row)
    items = session.execute(
        select(DatasetItem.key, DatasetItem.sha256, DatasetItem.split, DatasetItem.class_list,
               DatasetItem.class_id, DatasetItem.label_count, ImageBlob.size)
        .join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
        .where(DatasetItem.manifest_id == dataset.manifest_id).order_by(DatasetItem.id)).all()
    at = [drawn.rows.get(item.sha256) for item in items]
    placed = [item for item, n in zip(items, at, strict=True) if n is not None][:MAX_POINTS]
    index = np.array([n for n in at if n is not None][:MAX_POINTS], dtype=np.int64)
    xy = drawn.xy[index] if index.size else np.zeros((0, 2), np.float32)
    stale = newer or maps._is_stale(session, dataset, row, drawn)
    return {**body, "state": "ready", "count": len(placed), "missing": len(items) - len(placed),
            "stale": stale, "updatedAt": iso(row.computed_at), "datasetId": dataset.id,
            "keys": [item.key for item in placed],
            "x": np.round(xy[:, 0].astype(np.float64), 4).tolist(), "y": np.round(xy[:, 1].astype(np.float64), 4).tolist(),
            "fields": _fields(dataset, placed, drawn.cluster[index] if index.size else np.zeros(0, np.int32))}, False
