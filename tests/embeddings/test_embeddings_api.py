"""``datasets.embeddings|create_embeddings|delete_embeddings`` and ``images.find_similar_images`` through the
official SDK (typeguard on every answer), on SQLite and PostgreSQL: the model the server picks, progress, cancel,
an attempt that resumes after a crash without embedding again what was delivered, and the search's scope."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from ultralytics import YOLO
from ultralytics_platform import APIError

from lanner.accounts.principal import Principal
from lanner.accounts.service import get_user_by_username
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset
from lanner.embeddings import encoding, index, jobs, service
from lanner.embeddings.models import EmbeddingJob, ImageEmbedding
from lanner.projects import official
from lanner.projects.models import ModelRecord
from lanner.synthetic import make_detection_dataset
from lanner.training.executors.base import JobState
from tests.datasets.helpers import package, upload_dataset
from tests.embeddings.conftest import drive_worker, finish, launch
from tests.embeddings.near_duplicates import make_reencoded
from tests.sdk_types import assert_sdk_type
from tests.trained import attach_weights


@pytest.fixture
def shapes(sdk: Any, alice: Any, client: Any, tmp_path: Path) -> Any:
    make_detection_dataset(tmp_path / "shapes", train=12, val=6, size=64)
    platform = sdk(alice)
    upload_dataset(platform, client, "alice", "shapes", package(tmp_path / "shapes", tmp_path / "zip"))
    return platform


def trained_on_shapes(app: Any, alice: Any, weights: Path) -> str:
    model_id = attach_weights(app, alice, weights)
    with app.state.lanner.db.session() as session:
        session.get(ModelRecord, model_id).train_args = {"data": "ul://alice/datasets/shapes", "imgsz": 64}
    return model_id


def status(platform: Any) -> dict[str, Any]:
    return assert_sdk_type(platform.datasets.embeddings("alice", "shapes"), "DatasetsEmbeddingsResponse")


def test_analysis_picks_a_model_shows_progress_cancels_and_resumes(app, client, shapes, alice, tiny_weights,
                                                                  monkeypatch):
    platform = shapes
    assert status(platform) == {"analyzedAt": None, "embeddingsCount": 0, "latestImageAt": status(platform)[
        "latestImageAt"], "activeJob": None}
    with pytest.raises(APIError) as none:  # no model trained on it, no official weights installed
        platform.datasets.create_embeddings("alice", "shapes")
    assert none.value.status_code == 409 and "lanner models add-official yolo26n.pt" in none.value.json["error"]

    model_id = trained_on_shapes(app, alice, tiny_weights)
    first = assert_sdk_type(platform.datasets.create_embeddings("alice", "shapes"), "DatasetsCreateEmbeddingsResponse")
    assert platform.datasets.create_embeddings("alice", "shapes") == first  # the job under way, not a second one
    active = status(platform)["activeJob"]
    assert active["id"] == first["jobId"] and active["status"] == "queued" and active["progress"] is None
    cancelled = assert_sdk_type(platform.datasets.delete_embeddings("alice", "shapes"),
                                "DatasetsDeleteEmbeddingsResponse")
    assert cancelled == {"cancelled": first["jobId"]}
    assert platform.datasets.delete_embeddings("alice", "shapes") == {"cancelled": None}
    assert status(platform)["activeJob"] is None

    job_id = platform.datasets.create_embeddings("alice", "shapes")["jobId"]
    with app.state.lanner.db.session() as session:
        job = session.get(EmbeddingJob, job_id)
        assert job.model_id == model_id and job.model_label == "ul://alice/shapes/tiny" and job.total == 18
    model = YOLO(str(tiny_weights))
    spec = launch(app, job_id)
    assert spec["weightsSha256"] == hashlib.sha256(tiny_weights.read_bytes()).hexdigest()
    assert spec["vectorKey"] == encoding.vector_key(spec["weightsSha256"]) != spec["weightsSha256"]
    spec["batch"] = 5
    assert drive_worker(client, spec, model, pages=2) == 10  # then the worker dies
    progress = status(platform)["activeJob"]["progress"]
    assert progress["processed"] == 10 and progress["total"] == 18 and progress["percent"] == 55.6
    finish(app, job_id, JobState.LOST)
    assert status(platform)["activeJob"]["status"] == "queued"  # run again

    old = client.get(spec["manifestUrl"].removeprefix("http://testserver"))
    spec = launch(app, job_id)
    assert client.get(spec["manifestUrl"].removeprefix("http://testserver")).status_code == 200
    assert client.get(old.url.path + "?" + old.url.query.decode()).status_code == 409  # the lost attempt's link
    assert drive_worker(client, spec, model) == 8  # only what is missing: the delivered pages are skipped
    finish(app, job_id)
    done = status(platform)
    assert done["activeJob"] is None and done["embeddingsCount"] == 18 and done["analyzedAt"]
    with app.state.lanner.db.session() as session:
        assert session.get(EmbeddingJob, job_id).status == jobs.COMPLETED
        assert session.query(ImageEmbedding).count() == 18
        principal = Principal.of(get_user_by_username(session, username="alice"))
        dataset = datasets_service.get_dataset(session, principal, owner="alice", slug="shapes")
        assert service.freshness(session, principal, dataset) == "fresh"
        monkeypatch.setattr(encoding, "ENCODING", "another-encoding/2")  # a Lanner whose vectors mean otherwise
        assert service.freshness(session, principal, dataset) == "stale"
        monkeypatch.undo()
        session.query(ImageEmbedding).filter(ImageEmbedding.image_sha256 == session.query(ImageEmbedding)
                                             .first().image_sha256).delete()  # as if an image came since
        assert service.freshness(session, principal, dataset) == "stale"


def test_similar_images_search_what_the_caller_may_read(app, client, shapes, alice, make_account, sdk,
                                                        tiny_weights, tmp_path):
    platform = shapes
    trained_on_shapes(app, alice, tiny_weights)
    job_id = platform.datasets.create_embeddings("alice", "shapes")["jobId"]
    drive_worker(client, launch(app, job_id), YOLO(str(tiny_weights)))
    finish(app, job_id)
    image = platform.datasets.images("alice", "shapes", limit=1)["images"][0]

    alone = assert_sdk_type(platform.images.find_similar_images(image["id"]), "ImagesFindSimilarImagesResponse")
    assert alone == {"images": []}  # the source dataset is left out by default, and alice has no other
    found = assert_sdk_type(platform.images.find_similar_images(image["id"], include_source_dataset="true"),
                            "ImagesFindSimilarImagesResponse")["images"]
    assert len(found) == 17 and image["hash"] not in {i["hash"] for i in found}  # every other image, not itself
    assert [i["score"] for i in found] == sorted((i["score"] for i in found), reverse=True)
    assert found[0]["dataset"] == {"owner": "alice", "dataset": "shapes", "license": "None"}
    assert client.get(found[0]["thumbnailUrl"].removeprefix("http://testserver")).status_code == 200

    bob = sdk(make_account("bob"))
    with pytest.raises(APIError) as hidden:
        bob.images.find_similar_images(image["id"], include_source_dataset="true")
    assert hidden.value.status_code == 404
    with pytest.raises(APIError) as hidden:
        bob.datasets.embeddings("alice", "shapes")
    assert hidden.value.status_code == 404

    assert assert_sdk_type(platform.models.find_similar_training_images("alice", "shapes", "tiny"),
                           "ModelsFindSimilarTrainingImagesResponse") == {"images": []}  # no per-image results
    worst = ",".join(i["hash"] for i in found[:2])
    assert platform.models.find_similar_training_images("alice", "shapes", "tiny", hashes=worst) == {"images": []}

    # A second dataset analysed with the same weights (installed as official: the same digest, the same vectors'
    # meaning): the search crosses into it, and leaves out the training dataset's own images.
    official.install_file(app.state.lanner.db, app.state.lanner.blobs, tiny_weights, name="yolo11n")
    make_detection_dataset(tmp_path / "more", train=10, val=0, size=64, seed=5)
    upload_dataset(platform, client, "alice", "more", package(tmp_path / "more", tmp_path / "more-zip"))
    more_job = platform.datasets.create_embeddings("alice", "more")["jobId"]
    drive_worker(client, launch(app, more_job), YOLO(str(tiny_weights)))
    finish(app, more_job)
    across = platform.images.find_similar_images(image["id"])["images"]
    assert len(across) == 10 and {i["dataset"]["dataset"] for i in across} == {"more"}
    near = assert_sdk_type(platform.models.find_similar_training_images("alice", "shapes", "tiny", hashes=worst),
                           "ModelsFindSimilarTrainingImagesResponse")["images"]
    assert len(near) == 10 and {i["dataset"]["dataset"] for i in near} == {"more"}
    with pytest.raises(APIError) as bad:
        platform.models.find_similar_training_images("alice", "shapes", "tiny", hashes="not-a-hash")
    assert bad.value.status_code == 400


def test_worker_links_need_their_signature_and_a_known_page(app, client, shapes, alice, tiny_weights):
    trained_on_shapes(app, alice, tiny_weights)
    job_id = shapes.datasets.create_embeddings("alice", "shapes")["jobId"]
    spec = launch(app, job_id)
    manifest = spec["manifestUrl"].removeprefix("http://testserver")
    assert client.get(manifest.replace("signature=", "signature=0")).status_code == 403
    assert client.get(manifest.replace("/manifest?", "/manifesto?")).status_code in (403, 404)
    vectors = spec["vectorsUrl"].removeprefix("http://testserver")
    assert client.put(vectors, content=b"not an npz").status_code == 400
    assert client.put(vectors.replace(job_id, "x" * len(job_id)), content=b"").status_code == 403


def test_a_reencoded_copy_is_its_originals_nearest_image(app, client, sdk, alice, tiny_weights, tmp_path,
                                                          monkeypatch):
    """Through the whole path (worker pages, stored vectors, the index, the answer's ids): each of 10 images saved
    again as JPEG (other bytes) is the first answer for its original among 40. Raw pooled features of the tiny
    model all have cosine 0.99999 to each other and rank by float noise here; the index centres them."""
    platform = sdk(alice)
    pairs = make_reencoded(tmp_path / "shapes", images=30, copies=10)
    upload_dataset(platform, client, "alice", "shapes", package(tmp_path / "shapes", tmp_path / "zip"))
    trained_on_shapes(app, alice, tiny_weights)
    job_id = platform.datasets.create_embeddings("alice", "shapes")["jobId"]
    drive_worker(client, launch(app, job_id), YOLO(str(tiny_weights)))
    finish(app, job_id)
    ids = {i["name"]: i["id"] for i in platform.datasets.images("alice", "shapes", limit=100)["images"]}
    firsts = {original: platform.images.find_similar_images(ids[original], include_source_dataset="true")[
        "images"][0]["name"] for original in pairs}
    assert firsts == pairs
    index._cache.clear()  # another process: the index is read back from its files, with its mean
    files = list((app.state.lanner.settings.resolved_home / "embeddings" / "indexes").rglob("*-r*.*"))
    assert sorted(f.suffix for f in files) == [".faiss", ".npz"]
    original, copy = next(iter(pairs.items()))
    assert platform.images.find_similar_images(ids[original], include_source_dataset="true")["images"][0][
        "name"] == copy

    # A label edit bumps the revision and changes no vector: the index is taken over, not built again.
    with app.state.lanner.db.session() as session:
        dataset = session.get(Dataset, ids[original].rpartition("-")[0])
        dataset.revision += 1
        revision = dataset.revision
    index._cache.clear()
    monkeypatch.setattr(index, "build", lambda *args: pytest.fail("the index was built again"))
    assert platform.images.find_similar_images(ids[original], include_source_dataset="true")["images"][0][
        "name"] == copy
    files = list((app.state.lanner.settings.resolved_home / "embeddings" / "indexes").rglob("*.faiss"))
    assert [f.name.rpartition("-r")[2] for f in files] == [f"{revision}.faiss"]  # the older one is gone


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_cancelled_job_whose_worker_cannot_be_read_frees_its_slot_after_the_grace(
        app, shapes, alice, tiny_weights, monkeypatch) -> None:
    """The queues' base judges a worker it cannot read (a local worker on another host after the lease moved,
    a job Ray forgot) by its job: an ended one lets go after the stop grace (the worker is stopped, the slot
    freed); an active one is asked again. Before, a cancelled job's ``external_id`` stayed for ever."""
    from datetime import timedelta

    from lanner.training.executors import job_queue
    from tests.exports.test_queue import UnreadableExecutor

    trained_on_shapes(app, alice, tiny_weights)
    queue, fake = app.state.embeddings, UnreadableExecutor()
    queue._executor = fake
    job_id = shapes.datasets.create_embeddings("alice", "shapes")["jobId"]
    queue.run_once()  # launched; its status cannot be read from here on

    def held() -> str | None:
        with app.state.lanner.db.session() as session:
            return session.get(EmbeddingJob, job_id).external_id

    assert held() is not None
    queue.run_once()
    assert held() is not None and not fake.stopped  # active: it may be delivering from its host
    assert shapes.datasets.delete_embeddings("alice", "shapes") == {"cancelled": job_id}
    queue.run_once()
    assert held() is not None  # within the grace: it may be wrapping up
    later = job_queue.utcnow() + timedelta(seconds=job_queue.STOP_GRACE_SECONDS + 1)
    monkeypatch.setattr(job_queue, "utcnow", lambda: later)
    queue.run_once()
    assert held() is None and fake.stopped  # stopped as far as it can be reached, its slot free
