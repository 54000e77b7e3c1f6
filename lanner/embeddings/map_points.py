"""The dataset page's map (``web.map_pages``): the whole map in one columnar answer, and where a map not drawable
yet stands (no embeddings, embedding, the layout being computed).

``datasets.clustering`` serves the same layout in pages of one object per image, for SDK clients; the browser
draws up to 200,000 points and needs them all at once: one object per image is ~250 bytes of JSON and a
Python dict each (seconds of encoding for 100,000 images), columns of numbers are ~40 bytes an image and one
``json.dumps`` of lists. Both read the stored layout through ``maps`` (computed once per analysis).

Colour-by fields are a list: a ``category`` field (names + a code per point) or a ``number`` field (a value per
point + its unit), so a per-image score (uniqueness, a model's confidence) is one more entry of ``fields``."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem
from lanner.datasets.records import SPLITS
from lanner.db import after_commit, iso
from lanner.embeddings import maps, schemas
from lanner.embeddings.models import EmbeddingLayout
from lanner.embeddings.service import active_job, training_head
from lanner.errors import Conflict

MAX_POINTS = 200_000
KEEP_IN_MEMORY = 2  # (dataset, revision, layout) -> the columns: a reload or a second tab costs no SQL
_lock = threading.Lock()
_columns: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()


def _category(name: str, label: str, names: list[str], codes: np.ndarray) -> dict[str, Any]:
    return {"name": name, "label": label, "kind": "category", "names": names, "codes": codes}


def _number(name: str, label: str, unit: str, values: np.ndarray) -> dict[str, Any]:
    return {"name": name, "label": label, "kind": "number", "unit": unit, "values": values}


def _class_codes(class_lists: tuple[str, ...], names: list[str]) -> np.ndarray:
    """The one class of each image; ``len(names)`` for several, ``len(names) + 1`` for none. Few distinct
    ``class_list`` values in a dataset: each is parsed once."""
    several, unlabelled = len(names), len(names) + 1
    parsed: dict[str, int] = {}
    for value in set(class_lists):
        present = [int(c) for c in value.strip(",").split(",") if c]
        parsed[value] = (present[0] if len(present) == 1 and present[0] < len(names)
                         else several if present else unlabelled)
    return np.fromiter((parsed[v] for v in class_lists), np.int32, len(class_lists))


def _fields(dataset: Dataset, columns: dict[str, tuple[Any, ...]], cluster: np.ndarray) -> list[dict[str, Any]]:
    """Each point's colour-by values, in the points' order."""
    names = list(dataset.class_names or [])
    splits = {s: n for n, s in enumerate(SPLITS)}
    label_count = np.asarray(columns["label_count"], np.int32)
    has_class = np.fromiter((c is not None for c in columns["class_id"]), bool, len(label_count))
    clusters = int(cluster.max()) + 1 if cluster.size else 0
    return [
        _category("cluster", "Cluster", [f"Cluster {n + 1}" for n in range(clusters)], cluster.astype(np.int32)),
        _category("split", "Split", [*SPLITS, "none"],
                  np.fromiter((splits.get(s, len(SPLITS)) for s in columns["split"]), np.int32, len(label_count))),
        _category("class", "Class", [*names, "Several classes", "No class"],
                  _class_codes(columns["class_list"], names)),
        _category("labelled", "Label status", ["Labelled", "Unlabelled"],
                  np.where((label_count > 0) | has_class, 0, 1).astype(np.int32)),
        _number("labels", "Labels", "labels per image", label_count),
    ]


def progress(session: Session, settings: Settings, dataset: Dataset) -> dict[str, Any] | None:
    """The dataset's job under way as the SDK shows it, and whether it is training the copy-detection head
    (``trainingHead``: the pages' word for its minute at 100 %)."""
    job = active_job(session, dataset)
    if job is None:
        return None
    return {**schemas.active_job(job), "trainingHead": training_head(session, settings, job)}


def _read_columns(session: Session, dataset: Dataset, row: EmbeddingLayout) -> dict[str, Any]:
    """The points of the dataset's images that are on the map, in item order, and how many are not."""
    drawn = maps._points(row)
    found = session.execute(
        select(DatasetItem.key, DatasetItem.sha256, DatasetItem.split, DatasetItem.class_list,
               DatasetItem.class_id, DatasetItem.label_count)
        .where(DatasetItem.manifest_id == dataset.manifest_id).order_by(DatasetItem.id)).all()
    total = len(found)
    at = [drawn.rows.get(item[1]) for item in found]
    kept = [n for n, a in enumerate(at) if a is not None][:MAX_POINTS]
    index = np.fromiter((at[n] for n in kept), np.int64, len(kept))
    placed = [found[n] for n in kept]
    names = ("key", "sha256", "split", "class_list", "class_id", "label_count")
    columns = dict(zip(names, zip(*placed, strict=True), strict=True)) if placed else {n: () for n in names}
    xy = np.round(drawn.xy[index], 4) if index.size else np.zeros((0, 2), np.float32)
    return {"count": len(placed), "missing": total - len(placed), "keys": list(columns["key"]),
            "x": np.ascontiguousarray(xy[:, 0]), "y": np.ascontiguousarray(xy[:, 1]),
            "fields": _fields(dataset, columns, drawn.cluster[index] if index.size else np.zeros(0, np.int32))}


def _columns_of(session: Session, dataset: Dataset, row: EmbeddingLayout) -> dict[str, Any]:
    """``_read_columns``, kept per (dataset, revision, layout): every content change bumps the revision
    (``datasets.service.touch``). Kept once the reading transaction committed, as ``datasets.service`` keeps
    its counts."""
    key = (dataset.id, dataset.manifest_id, dataset.revision, iso(row.computed_at), tuple(dataset.class_names or ()))
    with _lock:
        if key in _columns:
            _columns.move_to_end(key)
            return _columns[key]
    value = _read_columns(session, dataset, row)

    def keep() -> None:
        with _lock:
            _columns[key] = value
            while len(_columns) > KEEP_IN_MEMORY:
                _columns.popitem(last=False)

    after_commit(session, keep)
    return value


def points(session: Session, principal: Principal, settings: Settings, *, owner: str, slug: str
           ) -> tuple[dict[str, Any], bool]:
    """The map of ``owner/slug`` for the page (numbers as numpy arrays: ``orjson`` with
    ``OPT_SERIALIZE_NUMPY`` writes them), and whether the caller must commit and wake the embedding queue (a
    large dataset's layout was asked for). ``state``: ``none`` (no embeddings: the page offers to compute
    them), ``embedding`` (the job's ``progress``), ``computing`` (the layout), ``failed`` (it is computed
    again) or ``ready`` (``keys``, ``x``, ``y``, ``fields``; ``job`` when a newer analysis runs)."""
    dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slug)
    body: dict[str, Any] = {"classes": list(dataset.class_names or []), "job": progress(session, settings, dataset)}
    try:
        row, newer = maps._ready_layout(session, settings, dataset, owner, slug)
    except Conflict as refused:
        state = {"no_embeddings": "embedding" if body["job"] else "none", "map_pending": "computing"}.get(
            refused.code or "", "failed")
        return {**body, "state": state, "message": refused.message}, False
    if row is None:
        return {**body, "state": "computing", "message": "the map of this dataset is being computed"}, True
    stale = newer or maps._is_stale(session, dataset, row, maps._points(row))
    return {**body, "state": "ready", "stale": stale, "updatedAt": iso(row.computed_at), "datasetId": dataset.id,
            **_columns_of(session, dataset, row)}, False
