"""``datasets.clustering`` (the map) through the official SDK, typeguard on every page, on SQLite and
PostgreSQL; and the layout itself (``embeddings.layout``): clusters far apart in the embedding stay apart in 2-D.

The vectors are stored as a finished analysis would leave them (a job completed through ``embeddings.jobs``,
one vector per image): three well-separated blobs, so the map's quality can be checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select
from ultralytics_platform import APIError

from lanner.datasets.models import Dataset, DatasetItem
from lanner.embeddings import jobs, layout, maps
from lanner.embeddings.models import EmbeddingJob, EmbeddingLayout, ImageEmbedding
from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset
from tests.embeddings.conftest import finish
from tests.sdk_types import assert_sdk_type

MODEL = "ab" * 32


def blobs(n: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` L2-normalised vectors around 3 far-apart centres, and which centre each came from."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, dim)) * 3
    truth = np.arange(n) % 3
    matrix = (centres[truth] + rng.normal(size=(n, dim))).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True), truth


def centroid_accuracy(xy: np.ndarray, truth: np.ndarray) -> float:
    """Each point given to the nearest of the true clusters' 2-D centroids: the share that lands in its own."""
    centres = np.stack([xy[truth == c].mean(axis=0) for c in range(3)])
    return float((np.argmin(((xy[:, None] - centres[None]) ** 2).sum(-1), axis=1) == truth).mean())


def test_layout_keeps_separated_clusters_apart_and_is_deterministic():
    matrix, truth = blobs(600, 64)
    xy, cluster = layout.compute(matrix)
    assert xy.shape == (600, 2) and np.isfinite(xy).all() and cluster.shape == (600,)
    assert centroid_accuracy(xy, truth) >= 0.9
    again, _ = layout.compute(matrix)
    assert np.allclose(xy, again)  # seeded: the same vectors give the same map
    tiny, _ = layout.compute(matrix[:3])  # too few points for UMAP: principal axes
    assert tiny.shape == (3, 2) and np.isfinite(tiny).all()


@pytest.fixture
def shapes(sdk: Any, alice: Any, client: Any, tmp_path: Path) -> Any:
    make_detection_dataset(tmp_path / "shapes", train=12, val=9, size=64)
    platform = sdk(alice)
    upload_dataset(platform, client, "alice", "shapes", package(tmp_path / "shapes", tmp_path / "zip"))
    return platform


def analysed(app: Any, *, by_queue: bool = False) -> dict[str, int]:
    """Store a completed analysis of alice/shapes: a vector per image from ``blobs``; each digest's blob. With
    ``by_queue`` the job completes as the embedding queue completes one (``finish``: index and map built)."""
    with app.state.lanner.db.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        hashes = sorted(set(session.scalars(select(DatasetItem.sha256)
                                            .where(DatasetItem.manifest_id == dataset.manifest_id))))
        matrix, truth = blobs(len(hashes), 32)
        for sha, vector in zip(hashes, matrix, strict=True):
            session.add(ImageEmbedding(model_sha256=MODEL, image_sha256=sha, dim=32, vector=vector.tobytes()))
        job = jobs.create(session, EmbeddingJob(dataset_id=dataset.id, owner_id=dataset.owner_id, model_sha256=MODEL,
                                                model_label="test", revision=dataset.revision, imgsz=64,
                                                total=len(hashes), processed=len(hashes)))
        session.flush()
        jobs.new_attempt(job)
        assert jobs.launched(session, job, external_id="test", executor="test") and jobs.running(session, job)
        assert by_queue or jobs.complete(session, job)
        job_id = job.id
    if by_queue:
        finish(app, job_id)
    return {sha: int(t) for sha, t in zip(hashes, truth, strict=True)}


def all_pages(platform: Any, limit: int) -> list[dict[str, Any]]:
    images, offset = [], 0
    while True:
        page = assert_sdk_type(platform.datasets.clustering("alice", "shapes", offset=offset, limit=limit),
                               "DatasetsClusteringResponse")
        assert page["total"] == 21 and page["offset"] == offset and page["limit"] == limit
        images += page["images"]
        if not page["hasMore"]:
            assert page["nextOffset"] is None
            return images
        offset = page["nextOffset"]


def test_clustering_pages_every_image_once_with_clusters_apart(app, client, shapes, alice, make_account, sdk):
    platform = shapes
    with pytest.raises(APIError) as none:
        platform.datasets.clustering("alice", "shapes")
    assert none.value.status_code == 409 and none.value.json["code"] == "no_embeddings"
    assert "datasets.create_embeddings" in none.value.json["error"]

    truth = analysed(app)
    images = all_pages(platform, limit=5)
    assert len(images) == 21 and len({i["id"] for i in images}) == 21  # every image, once
    listed = platform.datasets.images("alice", "shapes", limit=100)["images"]
    assert {i["id"] for i in images} == {i["id"] for i in listed}
    by_id = {i["id"]: i for i in listed}
    assert not any(i["missing"] for i in images)
    assert all(i["split"] == by_id[i["id"]]["split"] and i["labelCount"] == by_id[i["id"]]["labelCount"]
               for i in images)
    xy = np.array([[i["umapX"], i["umapY"]] for i in images])
    assert centroid_accuracy(xy, np.array([truth[by_id[i["id"]]["hash"]] for i in images])) >= 0.9
    assert all_pages(platform, limit=10_000) == images  # stored, not computed again: the same points

    response = client.get("/api/datasets/alice/shapes/images/clustering", headers=alice.headers)
    assert response.status_code == 200 and "x-lanner-map-stale" not in response.headers
    platform.images.delete(images[0]["id"])  # the dataset changed since the map
    response = client.get("/api/datasets/alice/shapes/images/clustering", headers=alice.headers)
    assert response.headers["x-lanner-map-stale"] == "true" and response.json()["total"] == 20

    bob = sdk(make_account("bob"))
    with pytest.raises(APIError) as hidden:
        bob.datasets.clustering("alice", "shapes")
    assert hidden.value.status_code == 404


def test_a_large_datasets_map_is_computed_by_the_queue(app, client, shapes):
    app.state.lanner.settings.embedding_map_inline_images = 10  # 21 images: too many to compute in the request
    platform = shapes
    analysed(app)
    with pytest.raises(APIError) as pending:
        platform.datasets.clustering("alice", "shapes")
    assert pending.value.status_code == 409 and pending.value.json["code"] == "map_pending"
    with app.state.lanner.db.session() as session:
        row = session.scalar(select(EmbeddingLayout))
        assert row.data is None and row.model_sha256 == MODEL
    maps.build_pending(app.state.lanner)  # the embedding queue's pass
    page = assert_sdk_type(platform.datasets.clustering("alice", "shapes"), "DatasetsClusteringResponse")
    assert len(page["images"]) == 21 and not page["hasMore"]


def test_the_queue_computes_the_map_when_an_analysis_completes(app, client, shapes):
    app.state.lanner.settings.embedding_map_inline_images = 0  # a request computes nothing
    analysed(app, by_queue=True)
    with app.state.lanner.db.session() as session:
        row = session.scalar(select(EmbeddingLayout))
        assert row.data is not None and row.count == 21 and row.error is None
    page = assert_sdk_type(shapes.datasets.clustering("alice", "shapes"), "DatasetsClusteringResponse")
    assert len(page["images"]) == 21 and not any(i["missing"] for i in page["images"])
