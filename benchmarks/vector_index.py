"""Which embedded vector index serves "similar images" (issue 31): query p95 and build time at 100,000 vectors.

    OMP_NUM_THREADS=2 PYTHONPATH=. .venv/bin/python -m benchmarks.vector_index [--n 100000] [--dim 256]

The vectors are shaped like YOLO embeddings (``YOLO.embed``: 256 pooled, L2-normalised, non-negative features
after SiLU): ``--clusters`` centres (scenes) with per-image noise, so approximate indexes are measured on data
with neighbourhoods rather than on uniform noise (their worst case, infra-reference.md). Each index answers 200
top-10 queries one at a time (a request asks for one image's neighbours); recall@10 is against the exact answer.
Candidates: faiss ``IndexFlatIP`` (exact), faiss ``IndexHNSWFlat`` (M 32) and usearch (HNSW, f32).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def vectors(n: int, dim: int, clusters: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = np.abs(rng.normal(size=(clusters, dim))).astype(np.float32)
    data = centres[rng.integers(0, clusters, n)] + 0.6 * np.abs(rng.normal(size=(n, dim))).astype(np.float32)
    return data / np.linalg.norm(data, axis=1, keepdims=True)


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1]


def timed_queries(search, queries: np.ndarray) -> tuple[float, list[np.ndarray]]:
    samples, answers = [], []
    for q in queries:
        start = time.perf_counter()
        answers.append(search(q[None, :]))
        samples.append((time.perf_counter() - start) * 1000)
    return p95(samples), answers


def recall(answers: list[np.ndarray], truth: list[np.ndarray]) -> float:
    return float(np.mean([len(set(a.tolist()) & set(t.tolist())) / len(t)
                          for a, t in zip(answers, truth, strict=True)]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--clusters", type=int, default=2_000)
    parser.add_argument("--skip-usearch", action="store_true")
    args = parser.parse_args()
    import faiss

    data = vectors(args.n, args.dim, args.clusters)
    queries = data[np.random.default_rng(1).choice(args.n, 200, replace=False)]
    print(f"{args.n} x {args.dim} float32, faiss {faiss.__version__}, threads {faiss.omp_get_max_threads()}")

    start = time.perf_counter()
    flat = faiss.IndexFlatIP(args.dim)
    flat.add(data)
    build = time.perf_counter() - start
    flat_p95, truth = timed_queries(lambda q: flat.search(q, 10)[1][0], queries)
    print(f"faiss IndexFlatIP (exact): build {build:.2f} s, p95 {flat_p95:.2f} ms, recall@10 1.000")

    start = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(args.dim, 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 40
    hnsw.add(data)
    build = time.perf_counter() - start
    for ef in (64, 128):
        hnsw.hnsw.efSearch = ef
        hnsw_p95, answers = timed_queries(lambda q: hnsw.search(q, 10)[1][0], queries)
        print(f"faiss IndexHNSWFlat M32 efSearch {ef}: build {build:.1f} s, p95 {hnsw_p95:.2f} ms, "
              f"recall@10 {recall(answers, truth):.3f}")

    if not args.skip_usearch:
        from usearch.index import Index

        start = time.perf_counter()
        index = Index(ndim=args.dim, metric="ip", dtype="f32")
        index.add(np.arange(args.n), data, threads=2)
        build = time.perf_counter() - start
        us_p95, answers = timed_queries(lambda q: index.search(q[0], 10).keys, queries)
        print(f"usearch HNSW f32: build {build:.1f} s, p95 {us_p95:.2f} ms, recall@10 {recall(answers, truth):.3f}")


if __name__ == "__main__":
    main()
