"""The map's 2-D layout (issue 31): how long ``lanner.embeddings.layout.compute`` takes on synthetic clustered
vectors shaped like ``YOLO.embed`` output, and whether the clusters stay apart in 2-D.

    OMP_NUM_THREADS=2 NUMBA_NUM_THREADS=2 PYTHONPATH=. .venv/bin/python -m benchmarks.layout [--n 100000]
        [--dim 256] [--clusters 20] [--epochs N]

Quality: nearest-centroid accuracy in 2-D (each point assigned to the closest 2-D centroid of the true
clusters); 1.0 means no cluster bleeds into another. The first call pays numba's compilation (cached on disk
after), so the timing is of a second call on fresh data.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from lanner.embeddings import layout


def clustered(n: int, dim: int, clusters: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    truth = rng.integers(0, clusters, size=n)
    matrix = centres[truth] + rng.normal(scale=0.6, size=(n, dim)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True), truth


def centroid_accuracy(xy: np.ndarray, truth: np.ndarray) -> float:
    labels = np.unique(truth)
    centres = np.stack([xy[truth == c].mean(axis=0) for c in labels])
    nearest = labels[np.argmin(((xy[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)]
    return float((nearest == truth).mean())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=None)
    args = parser.parse_args()
    warm, _ = clustered(2_000, args.dim, args.clusters, seed=1)
    started = time.perf_counter()
    layout.compute(warm)
    print(f"first call (2,000 points, includes numba compilation): {time.perf_counter() - started:.1f} s")
    matrix, truth = clustered(args.n, args.dim, args.clusters, seed=0)
    started, cpu = time.perf_counter(), time.process_time()
    xy, cluster = layout.compute(matrix, n_epochs=args.epochs)
    took, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"{args.n} x {args.dim}, {args.clusters} clusters, n_epochs {args.epochs or 'default'}: {took:.1f} s wall, "
          f"{cpu:.1f} s CPU, load average {os.getloadavg()[0]:.1f}, nearest-centroid accuracy "
          f"{centroid_accuracy(xy, truth):.3f}, {len(set(cluster.tolist()))} clusters found")


if __name__ == "__main__":
    main()
