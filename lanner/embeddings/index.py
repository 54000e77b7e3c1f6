"""A dataset's nearest-neighbour index: faiss (docs/architecture.md "Similar images" says why), one per dataset
revision and model digest, built from the stored vectors (the database is their one record, whatever the blob
store: the index is a cache any server process can rebuild, never a blob of its own).

Below ``HNSW_FROM`` vectors the index is exact (``IndexFlatIP``: no build time, a few ms per query); from there an
HNSW graph (M 32), whose build (about 30 s at 100,000 on two cores, docs/benchmarks.md) is paid once, when the
job completes (``warm``), and whose queries take about a millisecond. Files live under
``<home>/embeddings/indexes/<model digest>/<dataset id>-r<revision>.faiss`` beside a ``.npz`` of the digests in
index order and the mean; a process keeps the last few it used in memory."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    """``index`` holds the dataset's vectors less their ``mean``, normalised again: pooled CNN features share one
    large component (SiLU outputs are mostly positive), so raw cosines of a weakly trained model all round to
    0.99999 and rank by float noise; centred, a JPEG re-encoding of an image is its nearest neighbour
    (tests/embeddings). A query is centred with the same mean."""

    hashes: list[str]
    mean: np.ndarray
    index: Any  # a faiss index over the same rows

    def search(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` nearest images to ``query``: (digest, cosine similarity of the centred vectors), best first."""
        if not self.hashes:
            return []
        scores, rows = self.index.search(centred(query.reshape(1, -1), self.mean), min(k, len(self.hashes)))
        return [(self.hashes[int(row)], float(score))
                for row, score in zip(rows[0], scores[0], strict=True) if row >= 0]


def centred(matrix: np.ndarray, mean: np.ndarray) -> np.ndarray:
    out = np.asarray(matrix, dtype=np.float32) - mean
    return np.ascontiguousarray(out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12))


def build(matrix: np.ndarray) -> tuple[np.ndarray, Any]:
    """(mean, index) of the rows of ``matrix``: exact below ``HNSW_FROM`` rows, HNSW from there."""
    import faiss  # a second of start-up: only once a dataset is searched

    dim = matrix.shape[1]
    if matrix.shape[0] < HNSW_FROM:
        index = faiss.IndexFlatIP(dim)
    else:
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = EF_CONSTRUCTION
        index.hnsw.efSearch = EF_SEARCH
    mean = matrix.mean(axis=0).astype(np.float32)
    index.add(centred(matrix, mean))
    return mean, index


def _path(ctx: AppContext, dataset_id: str, revision: int, model_sha256: str) -> Path:
    return ctx.settings.resolved_home / "embeddings" / "indexes" / model_sha256 / f"{dataset_id}-r{revision}.faiss"


def _read(path: Path) -> DatasetIndex | None:
    """The index saved at ``path`` (and its ``.npz``), or None when either file is missing."""
    import faiss  # a second of start-up: only once a dataset is searched

    facts = path.with_suffix(".npz")
    try:
        with np.load(facts, allow_pickle=False) as saved:
            hashes, mean = [str(h) for h in saved["hashes"].tolist()], saved["mean"]
        return DatasetIndex(hashes, mean, faiss.read_index(str(path)))
    except (FileNotFoundError, RuntimeError):  # faiss raises RuntimeError for a missing file
        return None


def _save(path: Path, found: DatasetIndex) -> None:
    import faiss  # a second of start-up: only once a dataset is searched

    path.parent.mkdir(parents=True, exist_ok=True)
    mine = f".{os.getpid()}-{threading.get_ident()}.partial"  # two builders never share a half-written file
    partial, partial_facts = path.with_suffix(mine), path.with_suffix(".npz" + mine)
    faiss.write_index(found.index, str(partial))
    with partial_facts.open("wb") as out:
        np.savez(out, hashes=np.array(found.hashes), mean=found.mean)
    partial_facts.replace(path.with_suffix(".npz"))
    partial.replace(path)  # the index last: an index file is never read without its digests


def load(session: Session, ctx: AppContext, dataset: Dataset, model_sha256: str) -> DatasetIndex:
    """The index of ``dataset`` as it is now under ``model_sha256``: from memory, from its file, else from the
    file of an earlier revision when the images with a vector are still the same ones (a label edit bumps the
    revision and changes no vector: renaming beats a 30 s HNSW build), else built from the stored vectors. Read
    in the caller's ``session`` (a second session would wait for the first's SQLite write lock)."""
    key = (dataset.id, dataset.revision, model_sha256)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    path = _path(ctx, *key)
    found = _read(path)
    if found is None:
        hashes = vectors.dataset_hashes(session, dataset.manifest_id, model_sha256)
        if not hashes:
            return DatasetIndex([], np.zeros(0, np.float32), None)
        for older in sorted(path.parent.glob(f"{dataset.id}-r*.faiss")):
            previous = _read(older)
            if previous is not None and previous.hashes == hashes:
                found = previous
                _save(path, found)
                break
        if found is None:
            hashes, matrix = vectors.dataset_vectors(session, dataset.manifest_id, model_sha256)
            found = DatasetIndex(hashes, *build(matrix))
            _save(path, found)
        for old in path.parent.glob(f"{dataset.id}-r*.faiss"):  # older revisions are never asked again
            if old != path:
                old.unlink(missing_ok=True)
                old.with_suffix(".npz").unlink(missing_ok=True)
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
