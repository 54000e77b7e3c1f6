"""The map's 2-D layout of a dataset's vectors (``datasets.clustering``): UMAP (umap-learn) after PCA to
``PCA_DIMS`` dimensions, seeded, so the same vectors always land on the same map. docs/architecture.md
("The map") says why UMAP, and docs/benchmarks.md what it costs (about a minute for 100,000 images on two
cores). ``cluster`` is k-means (faiss) over the 2-D points: a colouring aid for the map, not a claim about the
data. Imported only where a layout is computed: umap and numba take seconds to import."""

from __future__ import annotations

import numpy as np

PCA_DIMS = 50
NEIGHBOURS = 15
SEED = 0
MIN_UMAP = 8  # below this many points UMAP's spectral start is undefined: the first two principal axes do


def _principal(matrix: np.ndarray, dims: int) -> np.ndarray:
    """``matrix`` centred and projected on its first ``dims`` principal axes, each axis's sign fixed so the
    projection is deterministic (an eigenvector's sign is arbitrary)."""
    centred = matrix - matrix.mean(axis=0)
    values, axes = np.linalg.eigh(centred.T.astype(np.float64) @ centred)
    axes = axes[:, np.argsort(values)[::-1][:dims]]
    axes *= np.where(axes[np.abs(axes).argmax(axis=0), range(axes.shape[1])] < 0, -1.0, 1.0)
    return (centred @ axes).astype(np.float32)


def clusters_for(n: int) -> int:
    """How many colours the map's k-means gives ``n`` points: about one per 50 up to 32."""
    return int(min(32, max(1, n // 50)))


def compute(matrix: np.ndarray, *, n_epochs: int | None = None, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """(n x 2 float32 coordinates, n cluster numbers) for the rows of ``matrix`` (n x dim)."""
    n = matrix.shape[0]
    if n == 0:
        return np.zeros((0, 2), np.float32), np.zeros(0, np.int32)
    reduced = _principal(np.asarray(matrix, np.float32), min(PCA_DIMS, matrix.shape[1], n))
    if n < MIN_UMAP:
        xy = np.zeros((n, 2), np.float32)
        xy[:, :min(2, reduced.shape[1])] = reduced[:, :2]
    else:
        import umap  # seconds of import (numba): only where a layout is computed

        # seeded UMAP runs on one thread (umap-learn's rule): the same vectors, the same map
        reducer = umap.UMAP(n_neighbors=min(NEIGHBOURS, n - 1), min_dist=0.1, n_components=2, random_state=seed,
                            n_jobs=1, n_epochs=n_epochs, low_memory=True)
        xy = np.asarray(reducer.fit_transform(reduced), np.float32)
    return xy, _kmeans(xy, clusters_for(n), seed)


def _kmeans(xy: np.ndarray, k: int, seed: int) -> np.ndarray:
    if k <= 1:
        return np.zeros(xy.shape[0], np.int32)
    import faiss  # a second of start-up: only where a layout is computed

    kmeans = faiss.Kmeans(2, k, niter=20, seed=seed, verbose=False)
    kmeans.train(np.ascontiguousarray(xy, np.float32))
    return kmeans.index.search(np.ascontiguousarray(xy, np.float32), 1)[1][:, 0].astype(np.int32)
