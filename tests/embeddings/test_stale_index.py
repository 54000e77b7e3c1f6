"""A dataset whose images changed since its index was built (issue 31): no request builds an HNSW index (28-44 s
at 100,000), the old index answers without the images that are gone, the embedding queue's pass builds the new
one, and two queries that find the same small index missing build it once."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from ultralytics import YOLO

from lanner.datasets.models import Dataset
from lanner.embeddings import index, vectors
from lanner.embeddings.models import EmbeddingJob
from tests.embeddings.conftest import drive_worker, finish, launch
from tests.embeddings.test_embeddings_api import shapes, trained_on_shapes  # noqa: F401 (a fixture)


def analysed(app: Any, client: Any, platform: Any, alice: Any, weights: Any) -> list[dict[str, Any]]:
    trained_on_shapes(app, alice, weights)
    job_id = platform.datasets.create_embeddings("alice", "shapes")["jobId"]
    drive_worker(client, launch(app, job_id), YOLO(str(weights)))
    finish(app, job_id)  # the job's end builds the index (``index.warm``)
    return platform.datasets.images("alice", "shapes", limit=100)["images"]


def counting_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    builds: list[int] = []
    real = index.build

    def counted(matrix: Any) -> Any:
        builds.append(len(matrix))
        return real(matrix)

    monkeypatch.setattr(index, "build", counted)
    return builds


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_removed_image_is_filtered_by_the_old_index_until_the_queue_builds_the_new(
        app, client, shapes, alice, tiny_weights, monkeypatch):  # noqa: F811
    monkeypatch.setattr(index, "HNSW_FROM", 5)  # 18 images count as a large (HNSW) dataset here
    images = analysed(app, client, shapes, alice, tiny_weights)
    builds = counting_builds(monkeypatch)
    query = images[0]

    def similar() -> list[str]:
        return [i["hash"] for i in shapes.images.find_similar_images(query["id"], include_source_dataset="true")[
            "images"]]

    before = similar()
    assert len(before) == 17 and builds == []
    gone = before[0]  # the nearest image, the one most likely to be answered by a stale index
    shapes.images.delete(next(i["id"] for i in images if i["hash"] == gone))
    for _ in range(2):
        after = similar()
        assert gone not in after and len(after) == 16 and after == [h for h in before if h != gone]
    assert builds == []  # the request answered from the old index, restricted to the images left

    app.state.embeddings.run_once()  # the queue's pass: the stale index is built again, off any request
    assert builds == [17]
    assert sorted(similar()) == sorted(after) and builds == [17]  # ranked by the new mean: the order may move
    with app.state.lanner.db.session() as session:
        dataset = session.get(Dataset, query["id"].rpartition("-")[0])
        model = session.query(EmbeddingJob).one().model_sha256
        fresh = index.load(session, app.state.lanner, dataset, model)
    assert fresh.allowed is None and len(fresh.hashes) == 17 and gone not in fresh.hashes
    app.state.embeddings.run_once()
    assert builds == [17]  # nothing left to build


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)  # SQLite: one session writes at a time
def test_two_queries_that_find_a_small_index_missing_build_it_once(
        app, client, shapes, alice, tiny_weights, monkeypatch):  # noqa: F811
    images = analysed(app, client, shapes, alice, tiny_weights)  # 18 images: an exact index, built inline
    shapes.images.delete(images[1]["id"])
    builds: list[int] = []
    building, second_came = threading.Event(), threading.Event()
    real_build, real_hashes = index.build, vectors.dataset_hashes

    def slow_build(matrix: Any) -> Any:
        building.set()
        assert second_came.wait(60), "the second query never came"
        return real_build(matrix)

    def hashes(*args: Any) -> list[str]:
        if building.is_set():  # the second query, past its look in memory and on disk, while the first builds
            second_came.set()
        return real_hashes(*args)

    monkeypatch.setattr(vectors, "dataset_hashes", hashes)
    found: list[index.DatasetIndex] = []

    def query() -> None:
        with app.state.lanner.db.session() as session:
            dataset = session.get(Dataset, images[0]["id"].rpartition("-")[0])
            model = session.query(EmbeddingJob).one().model_sha256
            found.append(index.load(session, app.state.lanner, dataset, model))

    monkeypatch.setattr(index, "build", lambda matrix: (builds.append(len(matrix)), slow_build(matrix))[1])
    first = threading.Thread(target=query)
    first.start()
    assert building.wait(60)
    second = threading.Thread(target=query)
    second.start()
    first.join(60)
    second.join(60)
    assert builds == [17] and len(found) == 2
    assert all(f.allowed is None and len(f.hashes) == 17 for f in found)
