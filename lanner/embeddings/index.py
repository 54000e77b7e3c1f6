"""A dataset's nearest-neighbour index: faiss (docs/architecture.md "Similar images" says why), one per dataset
revision and model digest, built from the stored vectors (the database is their one record, whatever the blob
store: the index is a cache any server process can rebuild, never a blob of its own).

Below ``HNSW_FROM`` vectors the index is exact (``IndexFlatIP``: no build time, a few ms per query); from there an
HNSW graph (M 32), whose build (about 30 s at 100,000 on two cores, docs/benchmarks.md) is paid once, when the
job completes (``warm``), and whose queries take about a millisecond. Files live under
``<home>/embeddings/indexes/<space>/<dataset id>-r<revision>.faiss`` beside a ``.npz`` of the digests in
index order and the mean, where the space is the vector key, and the digest of its copy-detection head once one
was trained (``embeddings.head``: the index then holds the head's vectors of the stored ones, and a query is
mapped by the same head; the head's arrival names a new space, so every index of the key is built again); a
process keeps the ones it searched last in memory, up to ``embedding_index_cache_mb`` (``nbytes``: about 230 MB
for 100,000 x 512 under HNSW).

A request never builds an HNSW index. When a dataset's images changed since its index was built (an image
removed, replaced or added: its revision moved and its digests differ), the request answers from the index it
has, restricted to the digests the dataset holds now (``allowed``), and the embedding queue's pass
(``build_stale``) builds the new one in the background, one build at a time per dataset (``_building``: a
thread lock and a file lock), the old one answering until the new one replaces it. Exact indexes (below
``HNSW_FROM``: a few ms to build, docs/benchmarks.md) are still built inside the request that needs them."""

from __future__ import annotations

import fcntl
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.context import AppContext
from lanner.datasets.models import Dataset
from lanner.embeddings import head, jobs, vectors
from lanner.embeddings.models import EmbeddingJob

HNSW_FROM = 20_000
HNSW_M = 32
EF_CONSTRUCTION = 40
EF_SEARCH = 64
MARGIN = 16  # extra neighbours asked for when some rows are no longer the dataset's

_lock = threading.Lock()
_cache: OrderedDict[tuple[str, str], tuple[int, DatasetIndex]] = OrderedDict()  # (dataset, space) -> revision's
_builders: dict[tuple[str, str], threading.Lock] = {}


@dataclass
class DatasetIndex:
    """``index`` holds the dataset's vectors less their ``mean``, normalised again: pooled CNN features share one
    large component (SiLU outputs are mostly positive), so raw cosines of a weakly trained model all round to
    0.99999 and rank by float noise; centred, a JPEG re-encoding of an image is its nearest neighbour
    (tests/embeddings). A query is centred with the same mean."""

    hashes: list[str]
    mean: np.ndarray
    index: Any  # a faiss index over the same rows
    allowed: frozenset[str] | None = None  # the digests the dataset holds now, when its index predates a change
    head: dict[str, np.ndarray] | None = None  # the vector key's copy-detection head, which queries go through

    def mapped(self, query: np.ndarray) -> np.ndarray:
        """``query`` as this index's rows were made from the stored vectors: through the head, when there is one
        (``search`` takes it back, so a query searching many datasets of one head maps it once)."""
        return query.reshape(1, -1) if self.head is None else head.apply(self.head, query)

    def search(self, query: np.ndarray, k: int, *, mapped: np.ndarray | None = None) -> list[tuple[str, float]]:
        """The ``k`` nearest images to ``query``: (digest, cosine similarity of the centred vectors), best first,
        only ones in ``allowed`` when it is set: ``2k + MARGIN`` neighbours are asked for, and four times more
        while fewer than ``k`` of them are still the dataset's (a removal of most of a dataset is rare and
        short-lived: the queue's next pass builds its index)."""
        if not self.hashes:
            return []
        vector = centred(self.mapped(query) if mapped is None else mapped, self.mean)
        wanted = k if self.allowed is None else 2 * k + MARGIN
        while True:
            asked = min(wanted, len(self.hashes))
            scores, rows = self.index.search(vector, asked)
            found = [(self.hashes[int(row)], float(score)) for row, score in zip(rows[0], scores[0], strict=True)
                     if row >= 0 and (self.allowed is None or self.hashes[int(row)] in self.allowed)]
            if len(found) >= k or asked == len(self.hashes):
                return found[:k]
            wanted *= 4

    def nbytes(self) -> int:
        """About what it holds in memory: the vectors, HNSW's level-0 links (2M int32 a row), the digests."""
        if self.index is None:
            return 0
        links = 2 * HNSW_M * 4 if hasattr(self.index, "hnsw") else 0
        return int(self.index.ntotal) * (int(self.index.d) * 4 + links) + 120 * len(self.hashes)


def centred(matrix: np.ndarray, mean: np.ndarray) -> np.ndarray:
    out = np.asarray(matrix, dtype=np.float32) - mean
    return np.ascontiguousarray(out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12))


def build(matrix: np.ndarray, mapping: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, Any]:
    """(mean, index) of the rows of ``matrix`` (through the head ``mapping`` when there is one): exact below
    ``HNSW_FROM`` rows, HNSW from there."""
    import faiss  # a second of start-up: only once a dataset is searched

    if mapping is not None:
        matrix = head.apply(mapping, matrix)
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


def space(session: Session, model_sha256: str) -> tuple[str, dict[str, np.ndarray] | None]:
    """(the name of the space the key's indexes live in, the key's head or None)."""
    trained = vectors.head_of(session, model_sha256)
    return (model_sha256, None) if trained is None else (f"{model_sha256}-head-{trained[0][:16]}", trained[1])


def _path(ctx: AppContext, dataset_id: str, revision: int, where: str) -> Path:
    return ctx.settings.resolved_home / "embeddings" / "indexes" / where / f"{dataset_id}-r{revision}.faiss"


def _read(path: Path, mapping: dict[str, np.ndarray] | None) -> DatasetIndex | None:
    """The index saved at ``path`` (and its ``.npz``), or None when either file is missing."""
    import faiss  # a second of start-up: only once a dataset is searched

    facts = path.with_suffix(".npz")
    try:
        with np.load(facts, allow_pickle=False) as saved:
            hashes, mean = [str(h) for h in saved["hashes"].tolist()], saved["mean"]
        return DatasetIndex(hashes, mean, faiss.read_index(str(path)), head=mapping)
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


def _remember(ctx: AppContext, key: tuple[str, str], revision: int, found: DatasetIndex) -> None:
    """Keep ``found`` as the dataset's index (replacing an older revision's), then drop the least recently
    searched ones beyond ``embedding_index_cache_mb`` (the one just kept stays, however large)."""
    budget = ctx.settings.embedding_index_cache_mb * 1024 * 1024
    with _lock:
        _cache[key] = (revision, found)
        _cache.move_to_end(key)
        total = sum(held.nbytes() for _, held in _cache.values())
        while total > budget and len(_cache) > 1:
            _, (_, dropped) = _cache.popitem(last=False)
            total -= dropped.nbytes()


def _newest_file(path: Path, dataset_id: str, mapping: dict[str, np.ndarray] | None) -> DatasetIndex | None:
    """The saved index of the dataset's latest revision before ``path``'s, if any."""
    def revision(file: Path) -> int:
        try:
            return int(file.stem.rpartition("-r")[2])
        except ValueError:
            return -1
    for older in sorted(path.parent.glob(f"{dataset_id}-r*.faiss"), key=revision, reverse=True):
        if older != path and (found := _read(older, mapping)) is not None:
            return found
    return None


def _forget_older(path: Path, dataset_id: str) -> None:
    for old in path.parent.glob(f"{dataset_id}-r*.faiss"):  # older revisions are never asked again
        if old != path:
            old.unlink(missing_ok=True)
            old.with_suffix(".npz").unlink(missing_ok=True)


@contextmanager
def _building(path: Path, key: tuple[str, str]) -> Iterator[None]:
    """One build of a dataset's index at a time: a lock per (dataset, model) in this process, and a lock on a
    file beside the indexes for the processes sharing this home. Whoever waited checks for the file after."""
    with _lock:
        mine = _builders.setdefault(key, threading.Lock())
    with mine:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / f"{key[0]}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _take_over_or_build(ctx: AppContext, dataset: Dataset, where: tuple[str, dict[str, np.ndarray] | None],
                        hashes: list[str], previous: DatasetIndex | None, read_vectors: Any) -> DatasetIndex:
    """Under ``_building``: the file another builder saved meanwhile, else ``previous`` saved again under the
    current revision when it holds the same images (a label edit bumps the revision and changes no vector:
    renaming beats a 30 s HNSW build), else a new index of ``read_vectors()``."""
    key, path = (dataset.id, where[0]), _path(ctx, dataset.id, dataset.revision, where[0])
    with _building(path, key):
        found = _read(path, where[1])
        if found is None and previous is not None and previous.hashes == hashes:
            found = DatasetIndex(previous.hashes, previous.mean, previous.index, head=where[1])
            _save(path, found)
        if found is None:
            built_hashes, matrix = read_vectors()
            found = DatasetIndex(built_hashes, *build(matrix, where[1]), head=where[1])
            _save(path, found)
        _forget_older(path, dataset.id)
        if where[1] is not None:  # the key's indexes from before its head: never searched again
            _forget_older(path.parent.parent / where[0].partition("-head-")[0] / path.name, dataset.id)
        _remember(ctx, key, dataset.revision, found)
    return found


def load(session: Session, ctx: AppContext, dataset: Dataset, model_sha256: str, *,
         build_large: bool = False, where: tuple[str, dict[str, np.ndarray] | None] | None = None) -> DatasetIndex:
    """The index of ``dataset`` as it is now under ``model_sha256``: from memory, else from its file, else the
    previous revision's when it holds the same images, else built now when it is exact (small) or when
    ``build_large`` (the queue, a job: never a request). Otherwise the previous index answers restricted to the
    current digests (``allowed``) until ``build_stale`` replaces it; with no previous one at all, an empty index
    (the dataset is left out until the queue's pass built it). Read in the caller's ``session`` (a second
    session would wait for the first's SQLite write lock). ``where``: the key's ``space``, when the caller loads
    several datasets of one key (one lookup of its head per query, not one per dataset)."""
    where = where or space(session, model_sha256)
    key = (dataset.id, where[0])
    path = _path(ctx, dataset.id, dataset.revision, where[0])
    with _lock:
        held = _cache.get(key)
        if held is not None:
            _cache.move_to_end(key)
    if held is not None and held[0] == dataset.revision:
        if held[1].allowed is None or not (build_large or path.exists()):  # exists: built by another process
            return held[1]
    found = _read(path, where[1])
    if found is not None:
        _remember(ctx, key, dataset.revision, found)
        return found
    hashes = vectors.dataset_hashes(session, dataset.manifest_id, model_sha256)
    if not hashes:
        return DatasetIndex([], np.zeros(0, np.float32), None)
    previous = held[1] if held is not None else _newest_file(path, dataset.id, where[1])
    if (previous is not None and previous.hashes == hashes) or len(hashes) < HNSW_FROM or build_large:
        return _take_over_or_build(ctx, dataset, where, hashes, previous,
                                   lambda: vectors.dataset_vectors(session, dataset.manifest_id, model_sha256))
    if previous is None:
        return DatasetIndex([], np.zeros(0, np.float32), None)
    stale = DatasetIndex(previous.hashes, previous.mean, previous.index, frozenset(hashes), where[1])
    _remember(ctx, key, dataset.revision, stale)
    return stale


def warm(ctx: AppContext, dataset_id: str, model_sha256: str) -> None:
    """Build the index of a dataset that was just analysed, so the first query does not wait for it."""
    with ctx.db.read_session() as session:  # no write lock held through a 30 s build
        dataset = session.get(Dataset, dataset_id)
        if dataset is not None:
            load(session, ctx, dataset, model_sha256, build_large=True)


def build_stale(ctx: AppContext) -> int:
    """The embedding queue's pass: build the index of every analysed dataset (under its latest analysis's model
    digest) whose current revision has no index file, i.e. whose images changed since its index was built, or
    that was never built here. The vectors are read in a session closed before the build (30 s at 100,000): no
    transaction stays open through it, and they are read without SQLite's write lock (``read_session``): a
    request holding that lock may be waiting for this build (``_building``). Returns how many were built or
    taken over."""
    with ctx.db.read_session() as session:
        latest: dict[str, str] = {}
        for dataset_id, model_sha256 in session.execute(
                select(EmbeddingJob.dataset_id, EmbeddingJob.model_sha256)
                .where(EmbeddingJob.status == jobs.COMPLETED).order_by(EmbeddingJob.completed_at, EmbeddingJob.id)):
            latest[dataset_id] = model_sha256
        spaces = {model: space(session, model) for model in set(latest.values())}
        todo = [(d.id, latest[d.id]) for d in session.scalars(select(Dataset).where(
            Dataset.id.in_(latest), Dataset.deleted_at.is_(None))) if not _path(ctx, d.id, d.revision,
                                                                                  spaces[latest[d.id]][0]).exists()]
    done = 0
    for dataset_id, model_sha256 in todo:
        with ctx.db.read_session() as session:
            dataset = session.get(Dataset, dataset_id)
            hashes = vectors.dataset_hashes(session, dataset.manifest_id, model_sha256) if dataset else []
            if dataset is not None:
                session.expunge(dataset)
        if not hashes:
            continue
        where = spaces[model_sha256]
        with _lock:
            held = _cache.get((dataset_id, where[0]))
        path = _path(ctx, dataset.id, dataset.revision, where[0])
        previous = held[1] if held is not None else _newest_file(path, dataset.id, where[1])
        _take_over_or_build(ctx, dataset, where, hashes, previous,
                            lambda manifest=dataset.manifest_id, model=model_sha256: _vectors(ctx, manifest, model))
        done += 1
    return done


def _vectors(ctx: AppContext, manifest_id: int, model_sha256: str) -> tuple[list[str], np.ndarray]:
    with ctx.db.read_session() as session:  # closed before the build starts
        return vectors.dataset_vectors(session, manifest_id, model_sha256)
