"""The index on its own: exact and HNSW answers agree on vectors with neighbourhoods, and a query is centred like
the rows (the nearest row of a row is itself, with similarity 1)."""

from __future__ import annotations

import numpy as np
import pytest

from lanner.embeddings import index


def clustered(n: int, dim: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = np.abs(rng.normal(size=(n // 10, dim)))
    data = centres[rng.integers(0, len(centres), n)] + 0.3 * np.abs(rng.normal(size=(n, dim)))
    return (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("hnsw_from", [10_000, 100], ids=["exact", "hnsw"])
def test_each_row_finds_itself_first_and_hnsw_agrees_with_exact(monkeypatch, hnsw_from):
    import faiss

    monkeypatch.setattr(index, "HNSW_FROM", hnsw_from)
    matrix = clustered(2_000)
    hashes = [f"{i:064x}" for i in range(len(matrix))]
    mean, built = index.build(matrix)
    assert isinstance(built, faiss.IndexHNSWFlat if hnsw_from == 100 else faiss.IndexFlatIP)
    found = index.DatasetIndex(hashes, mean, built)
    exact = index.DatasetIndex(hashes, mean, _flat(matrix, mean))
    agree = 0
    for row in range(0, 2_000, 40):
        answer = found.search(matrix[row], 10)
        assert answer[0][0] == hashes[row] and answer[0][1] == pytest.approx(1.0, abs=1e-4)
        agree += len({h for h, _ in answer} & {h for h, _ in exact.search(matrix[row], 10)})
    assert agree / (50 * 10) >= 0.95  # recall@10 of HNSW against exact


def _flat(matrix: np.ndarray, mean: np.ndarray):
    import faiss

    flat = faiss.IndexFlatIP(matrix.shape[1])
    flat.add(index.centred(matrix, mean))
    return flat
