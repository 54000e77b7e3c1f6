"""A dataset whose images changed since its index was built (issue 31): no request builds an HNSW index (28-44 s
at 100,000), the old index answers without the images that are gone, the embedding queue's pass builds the new
one, and two queries that find the same small index missing build it once."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest
from ultralytics import YOLO

from lanner.datasets.models import Dataset
from lanner.embeddings import index
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

    def counted(matrix: Any, mapping: Any = None) -> Any:
        builds.append(len(matrix))
        return real(matrix, mapping)

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
    found: list[index.DatasetIndex] = []
    real_build = index.build

    def query() -> None:
        with app.state.lanner.db.session() as session:
            dataset = session.get(Dataset, images[0]["id"].rpartition("-")[0])
            model = session.query(EmbeddingJob).one().model_sha256
            found.append(index.load(session, app.state.lanner, dataset, model))

    first, second = threading.Thread(target=query), threading.Thread(target=query)
    building = threading.Event()

    def waits_for_the_build(thread: threading.Thread) -> bool:
        frame = sys._current_frames().get(thread.ident or -1)
        while frame is not None:
            if frame.f_code.co_name == "_building":
                return True
            frame = frame.f_back
        return False

    def slow_build(matrix: Any, mapping: Any = None) -> Any:
        """The first query's build holds on until the second one builds too, or waits for this build."""
        builds.append(len(matrix))
        if threading.current_thread() is first:
            building.set()
            deadline = time.monotonic() + 60
            while len(builds) < 2 and not waits_for_the_build(second):
                assert time.monotonic() < deadline, "the second query neither built nor waited"
                time.sleep(0.01)
        return real_build(matrix, mapping)

    monkeypatch.setattr(index, "build", slow_build)
    first.start()
    assert building.wait(60)
    second.start()
    first.join(60)
    second.join(60)
    assert builds == [17] and len(found) == 2  # the second query found the first one's index, built once
    assert all(f.allowed is None and len(f.hashes) == 17 for f in found)
