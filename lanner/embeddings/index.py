"""A dataset's nearest-neighbour index: faiss (docs/architecture.md "Similar images" says why), one per dataset
revision and model digest, built from the stored vectors (the database is their one record, whatever the blob
store: the index is a cache any server process can rebuild, never a blob of its own).

Below ``HNSW_FROM`` vectors the index is exact (``IndexFlatIP``: no build time, a few ms per query); from there an
HNSW graph (M 32), whose build (about 30 s at 100,000 on two cores, docs/benchmarks.md) is paid once, when the
job completes (``warm``), and whose queries take about a millisecond. Files live under
``<home>/embeddings/indexes/<model digest>/<dataset id>-r<revision>.faiss`` beside a ``.npy`` of the digests in
index order; a process keeps the last few it used in memory."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session

from lanner.context import AppContext
from lanner.datasets.models import Dataset
from lanner.embeddings import vectors

HNSW_FROM = 20_000
HNSW_M = 32
EF_CONSTRUCTION = 40
EF_SEARCH = 64
KEEP_IN_MEMORY = 8

_lock = threading.Lock()
_cache: OrderedDict[tuple[str, int, str], DatasetIndex] = OrderedDict()


@dataclass
class DatasetIndex:
    hashes: list[str]
    index: object  # a faiss index over the same rows

    def search(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` nearest images to ``query`` (a normalised vector): (digest, cosine similarity), best first."""
        if not self.hashes:
            return []
        scores, rows = self.index.search(query.reshape(1, -1).astype(np.float32), min(k, len(self.hashes)))
        return [(self.hashes[int(row)], float(score))
                for row, score in zip(rows[0], scores[0], strict=True) if row >= 0]


def build(matrix: np.ndarray) -> object:
    import faiss  # a second of start-up: only once a dataset is searched

    dim = matrix.shape[1]
    if matrix.shape[0] < HNSW_FROM:
        index = faiss.IndexFlatIP(dim)
    else:
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = EF_CONSTRUCTION
        index.hnsw.efSearch = EF_SEARCH
    index.add(np.ascontiguousarray(matrix, dtype=np.float32))
    return index


def _path(ctx: AppContext, dataset_id: str, revision: int, model_sha256: str) -> Path:
    return ctx.settings.resolved_home / "embeddings" / "indexes" / model_sha256 / f"{dataset_id}-r{revision}.faiss"


def load(session: Session, ctx: AppContext, dataset: Dataset, model_sha256: str) -> DatasetIndex:
    """The index of ``dataset`` as it is now under ``model_sha256``: from memory, from its file, else built from
    the stored vectors read in the caller's ``session`` (a second session would wait for the first's SQLite
    write lock), and saved."""
    import faiss  # a second of start-up: only once a dataset is searched

    key = (dataset.id, dataset.revision, model_sha256)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    path = _path(ctx, *key)
    names = path.with_suffix(".npy")
    if path.exists() and names.exists():
        found = DatasetIndex([str(h) for h in np.load(names, allow_pickle=False).tolist()],
                             faiss.read_index(str(path)))
    else:
        hashes, matrix = vectors.dataset_vectors(session, dataset.manifest_id, model_sha256)
        found = DatasetIndex(hashes, build(matrix) if hashes else None)
        if hashes:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            faiss.write_index(found.index, str(partial))
            np.save(names, np.array(hashes), allow_pickle=False)
            partial.replace(path)  # the index last: a file without its digests is never read
            for old in path.parent.glob(f"{dataset.id}-r*.faiss"):  # older revisions are never asked again
                if old != path:
                    old.unlink(missing_ok=True)
                    old.with_suffix(".npy").unlink(missing_ok=True)
    with _lock:
        _cache[key] = found
        while len(_cache) > KEEP_IN_MEMORY:
            _cache.popitem(last=False)
    return found


def warm(ctx: AppContext, dataset_id: str, model_sha256: str) -> None:
    """Build the index of a dataset that was just analysed, so the first query does not wait for it."""
    with ctx.db.session() as session:
        dataset = session.get(Dataset, dataset_id)
        if dataset is not None:
            load(session, ctx, dataset, model_sha256)
