"""``datasets.clustering``: a dataset's map, the 2-D layout (``embeddings.layout``) of the vectors of its latest
analysis, served in pages of the dataset's images.

A layout is computed once per analysis, never per request: by the embedding queue when a job completes (and
for a layout asked for before any was computed: ``pending`` rows), or, for a dataset of at most
``embedding_map_inline_images`` embedded images, inside the first request that finds none (a few seconds).
Without an analysis the answer is 409 naming ``datasets.create_embeddings``. Images added since the layout was
computed are served with ``missing`` (no point yet) and the answer carries ``X-Lanner-Map-Stale: true``; so do
images removed or replaced since (the map no longer matches the dataset): a new ``create_embeddings`` both
embeds the new images and computes a new map."""

from __future__ import annotations

import io
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.context import AppContext
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.db import iso, utcnow
from lanner.embeddings import vectors
from lanner.embeddings.models import EmbeddingLayout
from lanner.embeddings.service import latest_analysis
from lanner.errors import Conflict

log = logging.getLogger("lanner.embeddings")
KEEP_IN_MEMORY = 4
_lock = threading.Lock()
_cache: OrderedDict[tuple[str, str], Points] = OrderedDict()


@dataclass
class Points:
    """A stored layout, decoded: the row of each digest, its coordinates and cluster."""

    rows: dict[str, int]
    xy: np.ndarray
    cluster: np.ndarray
    stale: dict[int, bool] = field(default_factory=dict)  # dataset revision -> does the map miss a change


def pack(hashes: list[str], xy: np.ndarray, cluster: np.ndarray) -> bytes:
    out = io.BytesIO()
    digests = np.frombuffer(b"".join(bytes.fromhex(h) for h in hashes), np.uint8).reshape(len(hashes), 32)
    np.savez_compressed(out, sha256=digests, xy=xy.astype(np.float32), cluster=cluster.astype(np.int32))
    return out.getvalue()


def unpack(data: bytes) -> Points:
    with np.load(io.BytesIO(data), allow_pickle=False) as saved:
        digests, xy, cluster = saved["sha256"], saved["xy"], saved["cluster"]
    return Points({row.tobytes().hex(): n for n, row in enumerate(digests)}, xy, cluster)


def build(ctx: AppContext, dataset_id: str, model_sha256: str) -> None:
    """Compute and store the map of ``dataset_id``'s vectors under ``model_sha256``. The vectors are read in one
    session and the layout stored in another: no transaction stays open through the minute UMAP may take."""
    from lanner.embeddings import layout  # umap: seconds of import, only where a layout is computed

    with ctx.db.session() as session:
        dataset = session.get(Dataset, dataset_id)
        if dataset is None or dataset.deleted_at is not None:
            return
        revision = dataset.revision
        hashes, matrix = vectors.dataset_vectors(session, dataset.manifest_id, model_sha256)
    error, data = None, None
    try:
        xy, cluster = layout.compute(matrix)
        data = pack(hashes, xy, cluster)
    except Exception as exc:  # kept on the row: the request says why, and asking again retries
        log.exception("the map of dataset %s could not be computed", dataset_id)
        error = f"{type(exc).__name__}: {exc}"[:2000]
    with ctx.db.session() as session:
        _store(session, dataset_id, model_sha256, revision, len(hashes), data, error)


def _store(session: Session, dataset_id: str, model_sha256: str, revision: int, count: int, data: bytes | None,
           error: str | None) -> None:
    row = session.get(EmbeddingLayout, dataset_id)
    if row is None:
        row = EmbeddingLayout(dataset_id=dataset_id)
        session.add(row)
    row.model_sha256, row.revision, row.count, row.data, row.error = model_sha256, revision, count, data, error
    row.computed_at = utcnow() if data is not None else None


def build_pending(ctx: AppContext) -> None:
    """The embedding queue's pass: compute the maps requests asked for (rows without data or error)."""
    with ctx.db.session() as session:
        pending = session.execute(select(EmbeddingLayout.dataset_id, EmbeddingLayout.model_sha256).where(
            EmbeddingLayout.data.is_(None), EmbeddingLayout.error.is_(None))).all()
    for dataset_id, model_sha256 in pending:
        build(ctx, dataset_id, model_sha256)


def _points(row: EmbeddingLayout) -> Points:
    key = (row.dataset_id, iso(row.computed_at) or "")
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    assert row.data is not None
    points = unpack(row.data)
    with _lock:
        _cache[key] = points
        while len(_cache) > KEEP_IN_MEMORY:
            _cache.popitem(last=False)
    return points


def _is_stale(session: Session, dataset: Dataset, row: EmbeddingLayout, points: Points) -> bool:
    """Whether the dataset's images are no longer the ones the map was computed from (once per revision)."""
    if dataset.revision == row.revision:
        return False
    if dataset.revision not in points.stale:
        now = set(session.scalars(select(DatasetItem.sha256).where(DatasetItem.manifest_id == dataset.manifest_id)
                                  .distinct()))
        points.stale[dataset.revision] = now != set(points.rows)
    return points.stale[dataset.revision]


def _ready_layout(session: Session, settings: Settings, dataset: Dataset, owner: str, slug: str
                  ) -> tuple[EmbeddingLayout | None, bool]:
    """The dataset's computed map, computing it here when it is small, and whether a newer analysis (another
    model) has made it stale; None when a request for the queue was written instead (the caller commits it,
    wakes the queue and answers 409 ``map_pending``)."""
    analysis = latest_analysis(session, dataset)
    if analysis is None:
        raise Conflict(f"dataset {owner}/{slug} has no embeddings yet: create them with datasets.create_embeddings "
                       f"(POST /api/datasets/{owner}/{slug}/embeddings), then ask for the map again",
                       code="no_embeddings")
    row = session.get(EmbeddingLayout, dataset.id)
    if row is not None and row.data is not None:
        return row, row.model_sha256 != analysis.model_sha256  # the queue computes the new one meanwhile
    if row is not None and row.error is None:
        raise Conflict("the map of this dataset is being computed; ask again in a minute", code="map_pending")
    count = vectors.embedded_count(session, dataset, analysis.model_sha256)
    if count <= settings.embedding_map_inline_images:
        from lanner.embeddings import layout  # umap: seconds of import, only where a layout is computed

        hashes, matrix = vectors.dataset_vectors(session, dataset.manifest_id, analysis.model_sha256)
        xy, cluster = layout.compute(matrix)
        _store(session, dataset.id, analysis.model_sha256, dataset.revision, len(hashes), pack(hashes, xy, cluster),
               None)
        session.flush()
        return session.get(EmbeddingLayout, dataset.id), False
    if row is not None:  # it failed before: the error is answered once, and asking again retries
        error, row.error = row.error, None
        raise Conflict(f"the map of this dataset could not be computed ({error}); it is being computed again",
                       code="map_failed")
    _store(session, dataset.id, analysis.model_sha256, dataset.revision, count, None, None)
    return None, False


def clustering(session: Session, principal: Principal, settings: Settings, *, owner: str, slug: str, offset: int,
               limit: int) -> tuple[dict[str, Any], bool] | None:
    """``DatasetsClusteringResponse`` for one page of the dataset's images (in a stable order) and whether the
    map is stale; None when the map was queued (the caller commits, wakes the queue and answers 409)."""
    dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slug)
    row, newer = _ready_layout(session, settings, dataset, owner, slug)
    if row is None:
        return None
    points = _points(row)
    total = int(session.scalar(select(func.count()).select_from(DatasetItem)
                               .where(DatasetItem.manifest_id == dataset.manifest_id)) or 0)
    page = session.execute(
        select(DatasetItem.key, DatasetItem.sha256, DatasetItem.split, DatasetItem.class_list,
               DatasetItem.label_count, ImageBlob.width, ImageBlob.height, ImageBlob.size)
        .join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
        .where(DatasetItem.manifest_id == dataset.manifest_id)
        .order_by(DatasetItem.id).offset(offset).limit(limit)).all()
    images = [_image(dataset.id, item, points) for item in page]
    more = offset + len(images) < total
    return ({"images": images, "total": total, "offset": offset, "limit": limit, "hasMore": more,
             "nextOffset": offset + len(images) if more else None, "updatedAt": iso(row.computed_at)},
            newer or _is_stale(session, dataset, row, points))


def _image(dataset_id: str, item: Any, points: Points) -> dict[str, Any]:
    at = points.rows.get(item.sha256)
    return {"id": f"{dataset_id}-{item.key}",
            "umapX": float(points.xy[at, 0]) if at is not None else 0.0,
            "umapY": float(points.xy[at, 1]) if at is not None else 0.0,
            "cluster": int(points.cluster[at]) if at is not None else None,
            "split": item.split if item.split in ("train", "val", "test") else None,
            "classIds": [int(c) for c in item.class_list.strip(",").split(",") if c],
            "width": int(item.width), "height": int(item.height), "bytes": int(item.size),
            "labelCount": int(item.label_count), "labeled": item.label_count > 0, "missing": at is None}
