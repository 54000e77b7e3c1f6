"""The copy-detection head (``lanner.embeddings.head``): it learns which directions of a vector edits move; what
a worker delivers is checked before it is kept, once per vector key; indexes search through it from then on.
Its effect on real images: tests/embeddings/test_encoding.py and benchmarks/embeddings_quality.py."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest
from ultralytics import YOLO

from lanner.config import Settings
from lanner.embeddings import head, index, worker
from lanner.embeddings.models import EmbeddingHead
from tests.embeddings.conftest import drive_worker, finish, launch, relative
from tests.embeddings.test_embeddings_api import shapes, trained_on_shapes  # noqa: F401 (fixture)


def test_the_head_learns_to_ignore_what_edits_change():
    """Vectors made of an identity (16 numbers) and a nuisance (48 numbers, three times as large) that every
    edit draws anew: raw, an edit's nearest image is almost never its own; through the head nearly always."""
    rng = np.random.default_rng(0)
    count = 400
    identity = rng.normal(size=(count, 16)).astype(np.float32)

    def edited() -> np.ndarray:
        vectors = np.hstack([identity, 3 * rng.normal(size=(count, 48)).astype(np.float32)])
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    mapping = head.train(np.stack([edited() for _ in range(head.VIEWS)], 1), epochs=40)
    first, second = edited(), edited()

    def own_is_nearest(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.mean(np.argmax(a @ b.T, axis=1) == np.arange(count)))

    raw = own_is_nearest(first, second)
    through = own_is_nearest(head.apply(mapping, first), head.apply(mapping, second))
    assert raw < 0.3 and through > 0.9, (raw, through)


def test_a_serialised_head_is_checked_before_use():
    rng = np.random.default_rng(1)
    arrays = head.train(rng.normal(size=(20, head.VIEWS, 8)).astype(np.float32), epochs=1)
    data = head.to_bytes(arrays, 20)
    back = head.from_bytes(data)
    assert head.images_of(data) == 20 and all(np.array_equal(back[k], arrays[k]) for k in head.ARRAYS)
    vectors = head.apply(back, rng.normal(size=(3, 8)))
    assert vectors.shape == (3, 8 + head.OUT) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    for broken in (b"not an npz", head.to_bytes({**arrays, "b1": arrays["b1"][:-1]}, 20),
                   head.to_bytes({**arrays, "w2": arrays["w2"] * np.nan}, 20)):
        with pytest.raises(ValueError, match="not a head"):
            head.from_bytes(broken)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"embedding_head_min_images": 10})


def test_a_worker_trains_the_keys_head_once_and_indexes_search_through_it(app, client, shapes, alice,  # noqa: F811
                                                                          tiny_weights):
    trained_on_shapes(app, alice, tiny_weights)
    job_id = shapes.datasets.create_embeddings("alice", "shapes")["jobId"]
    spec = launch(app, job_id)
    assert spec["sampleUrl"] and spec["headUrl"]  # 18 images, at least the 10 asked for, and no head yet
    model = YOLO(str(tiny_weights))
    drive_worker(client, spec, model)
    assert training_head(app, job_id)  # every image embedded: the pages say the head is being trained

    sample = client.get(relative(spec["sampleUrl"]))
    assert sample.status_code == 200
    listed = sample.json()["images"]
    assert len(listed) == 18 and [i["sha256"] for i in listed] == sorted(i["sha256"] for i in listed)
    assert client.get(relative(spec["sampleUrl"]).replace("signature=", "signature=0")).status_code == 403
    pixels = [cv2.imdecode(np.frombuffer(client.get(relative(i["url"])).content, np.uint8), cv2.IMREAD_COLOR)
              for i in listed]
    edits = head.views(pixels, lambda batch: worker.embed(model, batch, spec["imgsz"]))
    assert edits.shape == (18, head.VIEWS, 512)
    trained = head.train(edits, epochs=2)

    url = relative(spec["headUrl"])
    refused = client.put(url, content=b"not a head")
    assert refused.status_code == 400 and "not a head" in refused.json()["error"]
    narrow = head.train(edits[:, :, :256], epochs=1)
    refused = client.put(url, content=head.to_bytes(narrow, 18))
    assert refused.status_code == 400 and "512" in refused.json()["error"]
    assert client.put(url.replace("signature=", "signature=0"), content=head.to_bytes(trained, 18)).status_code == 403
    assert client.put(url, content=head.to_bytes(trained, 18)).json() == {"kept": True}
    assert not training_head(app, job_id)
    other = head.to_bytes(head.train(edits, epochs=1, seed=1), 18)
    assert client.put(url, content=other).json() == {"kept": False}  # the first one stays
    with app.state.lanner.db.session() as session:
        kept: Any = session.get(EmbeddingHead, launch_key(app, job_id))
        assert kept.images == 18 and kept.sha256 == head.digest(kept.data)
    finish(app, job_id)

    again = shapes.datasets.create_embeddings("alice", "shapes")["jobId"]  # fresh: nothing to do, no head asked
    assert again == job_id or "headUrl" not in launch(app, again)
    image = shapes.datasets.images("alice", "shapes", limit=1)["images"][0]
    similar = shapes.images.find_similar_images(image["id"], include_source_dataset="true")["images"]
    assert len(similar) == 17 and image["hash"] not in {i["hash"] for i in similar}
    spaces = [p.name for p in (app.state.lanner.settings.resolved_home / "embeddings" / "indexes").iterdir()]
    assert len(spaces) == 1 and "-head-" in spaces[0]
    held = next(found for (_, where), (_, found) in index._cache.items() if where == spaces[0])
    assert held.head is not None and held.index.d == 512 + head.OUT


def training_head(app: Any, job_id: str) -> bool:
    """What the map page and the Similar strip are told about the job (``map_points.progress``)."""
    from lanner.datasets.models import Dataset
    from lanner.embeddings import map_points
    from lanner.embeddings.models import EmbeddingJob

    with app.state.lanner.db.session() as session:
        dataset = session.get(Dataset, session.get(EmbeddingJob, job_id).dataset_id)
        shown = map_points.progress(session, app.state.lanner.settings, dataset)
        return bool(shown and shown["progress"]["percent"] == 100.0 and shown["trainingHead"])


def launch_key(app: Any, job_id: str) -> str:
    from lanner.embeddings.models import EmbeddingJob

    with app.state.lanner.db.session() as session:
        return session.get(EmbeddingJob, job_id).model_sha256
