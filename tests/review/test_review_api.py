"""The review API end to end in-process: a scores job asked for, launched by the review queue (fake executor),
its worker (the real auto-annotation worker code, in-process) predicting with the session's tiny detector and
posting chunks; the scores stored per image, read in order, and the Review queue handing out images by
mistakenness, each once per pass. A second user gets 404 everywhere; a forged worker token gets 404."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from lanner.autolabel.worker import SPEC_ENV, TOKEN_HEADER
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import utcnow
from lanner.embeddings.models import EmbeddingJob, ImageEmbedding
from lanner.projects.models import ModelRecord
from lanner.review import scoring
from lanner.review.models import ImageScore, ReviewJob
from tests.autolabel.conftest import InProcessHTTP, detector, run_worker, shapes_dataset
from tests.training.fakes import FakeExecutor

API = "/api/datasets/alice/shapes/review"
MODEL = "ul://alice/shapes/tiny"


def _auth(account: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {account.key}"}


@pytest.fixture
def world(app, client, make_account, tmp_path, tiny_weights):
    alice = make_account("alice")
    shapes_dataset(app, tmp_path, "alice", unlabelled=0)
    detector(app, alice, tiny_weights)
    return alice


def _score(app: Any, client: Any, alice: Any, monkeypatch: Any, tmp_path: Any) -> tuple[str, list[dict]]:
    """Ask for scores, launch the job and run its worker; the job id and every chunk the worker posted."""
    executor = FakeExecutor()
    app.state.review._executor = executor
    answer = client.post(API, json={"modelId": MODEL}, headers=_auth(alice))
    assert answer.status_code == 200, answer.text
    job_id = answer.json()["jobId"]
    assert client.get(API, headers=_auth(alice)).json()["activeJob"]["progress"] == {"processed": 0, "total": 8}
    app.state.review.one_pass()
    spec = json.loads(executor.launched[-1].env[SPEC_ENV])
    assert spec["chunkUrl"].endswith("/api/review/chunks") and len(spec["images"]) == 8
    posted: list[dict] = []
    http = InProcessHTTP(client)
    original = http.client.request

    def spy(method: str, url: str, **kwargs: Any) -> Any:
        if url.endswith("/api/review/chunks") and kwargs.get("content"):  # the worker's posts
            posted.extend(json.loads(kwargs["content"])["results"])
        return original(method, url, **kwargs)

    monkeypatch.setattr(http.client, "request", spy)
    spec["confidence"] = 0.001  # the tiny detector is weak: let it say something about every image
    run_worker(monkeypatch, http, spec, tmp_path / "worker")
    return job_id, posted


def test_scores_are_computed_stored_and_served_in_mistakenness_order(app, client, world, monkeypatch, tmp_path):
    alice = world
    assert client.get(API, headers=_auth(alice)).json() == {
        "scores": "none", "model": None, "scoredAt": None, "revision": None, "inPass": False, "activeJob": None}
    assert client.post(API + "/next", headers=_auth(alice)).json() == {"image": None}

    job_id, posted = _score(app, client, alice, monkeypatch, tmp_path)
    assert len(posted) == 8 and all(len(r["confidences"]) == len(r["labels"]) for r in posted)
    status = client.get(API, headers=_auth(alice)).json()
    assert status["scores"] == "fresh" and status["activeJob"] is None and status["model"] == MODEL
    with app.state.lanner.db.session() as session:
        assert session.get(ReviewJob, job_id).status == "completed"
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        labels = {i.key: i.labels for i in session.scalars(select(DatasetItem).where(
            DatasetItem.manifest_id == dataset.manifest_id))}
        stored = {row.key: row.mistakenness for row in session.scalars(select(ImageScore))}
    kinds = {}  # each image scored against its own labels and the predictions the worker posted, then calibrated
    for result in posted:
        predictions = [{**p, "confidence": c} for p, c in zip(result["labels"], result["confidences"], strict=True)]
        kinds[result["key"]] = scoring.mistakenness(labels[result["key"]], predictions).kinds
    order = sorted(kinds)
    assert [stored[k] for k in order] == pytest.approx(scoring.calibrated([kinds[k] for k in order]))
    assert max(stored.values()) == 1.0

    images = client.get(API + "/images", headers=_auth(alice)).json()["images"]
    assert [i["key"] for i in images] == sorted(stored, key=lambda k: (-stored[k], k))
    queue = [client.post(API + "/next", headers=_auth(alice)).json()["image"] for _ in range(9)]
    assert [i["key"] for i in queue[:8]] == [i["key"] for i in images] and queue[8] is None  # each once a pass
    assert client.get(API, headers=_auth(alice)).json()["inPass"] is True
    again = client.post(API + "/next", json={"restart": True}, headers=_auth(alice)).json()["image"]
    assert again["key"] == images[0]["key"]

    with app.state.lanner.db.session() as session:  # the model retrained: stale; its weights back: fresh again
        model = session.get(ReviewJob, job_id).model_id
        session.get(ModelRecord, model).weights_sha256 = "f" * 64
    assert client.get(API, headers=_auth(alice)).json()["scores"] == "stale"
    with app.state.lanner.db.session() as session:
        session.get(ModelRecord, model).weights_sha256 = session.get(ReviewJob, job_id).model_sha256
    assert client.get(API, headers=_auth(alice)).json()["scores"] == "fresh"
    key = images[0]["key"]  # a label edit: the scores are stale until computed again
    revision = client.get(f"/api/datasets/alice/shapes/annotate/{key}", headers=_auth(alice)).json()["revision"]
    answer = client.put(f"/api/datasets/alice/shapes/annotate/{key}", headers=_auth(alice),
                        json={"labels": [], "revision": revision, "editId": "review-test-1"})
    assert answer.status_code == 200, answer.text
    assert client.get(API, headers=_auth(alice)).json()["scores"] == "stale"


def test_a_second_user_and_a_forged_worker_get_404(app, client, world, make_account, monkeypatch, tmp_path):
    alice = world
    bob = make_account("bob")
    _score(app, client, alice, monkeypatch, tmp_path)
    for method, path in (("GET", API), ("POST", API), ("DELETE", API), ("GET", API + "/images"),
                         ("POST", API + "/next")):
        answer = client.request(method, path, headers=_auth(bob))
        assert answer.status_code == 404, (method, path, answer.text)
    forged = client.post("/api/review/chunks", json={"results": []}, headers={TOKEN_HEADER: "forged"})
    assert forged.status_code == 404
    with app.state.lanner.db.session() as session:  # bob's calls changed nothing of alice's
        assert all(row.reviewed_at is None for row in session.scalars(select(ImageScore)))
        assert session.scalar(select(ReviewJob).where(ReviewJob.status != "completed")) is None


def test_uniqueness_comes_from_the_datasets_embedding_analysis(app, client, world, monkeypatch, tmp_path):
    """With a completed analysis (its vectors stored as the embedding worker stores them), the job's finish gives
    every image a uniqueness: the image whose vector is far from all others 1.0, the rest below."""
    alice = world
    rng = np.random.default_rng(4)
    with app.state.lanner.db.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        rows = sorted(session.execute(select(DatasetItem.key, DatasetItem.sha256).where(
            DatasetItem.manifest_id == dataset.manifest_id)))
        digest = "e" * 64
        session.add(EmbeddingJob(dataset_id=dataset.id, owner_id=dataset.owner_id, model_sha256=digest,
                                 model_label="ul://alice/shapes/tiny", revision=dataset.revision, imgsz=64,
                                 status="completed", completed_at=utcnow()))
        base = rng.normal(size=16)
        for n, (_, sha) in enumerate(rows):
            vector = base + rng.normal(size=16) * (3.0 if n == 0 else 0.1)
            vector = (vector / np.linalg.norm(vector)).astype(np.float32)
            session.add(ImageEmbedding(model_sha256=digest, image_sha256=sha, dim=16, vector=vector.tobytes()))
    _score(app, client, alice, monkeypatch, tmp_path)
    images = client.get(API + "/images?sort=uniqueness", headers=_auth(alice)).json()["images"]
    assert len(images) == len(rows) and all(0.0 <= image["uniqueness"] <= 1.0 for image in images)
    assert images[0]["key"] == rows[0][0] and images[0]["uniqueness"] == 1.0 and images[1]["uniqueness"] < 0.9


def test_without_a_model_that_knows_the_classes_the_answer_says_what_to_do(app, client, make_account, tmp_path):
    bob = make_account("bob")
    shapes_dataset(app, tmp_path, "bob", unlabelled=0)
    answer = client.post("/api/datasets/bob/shapes/review", headers=_auth(bob))
    assert answer.status_code == 409 and answer.json()["code"] == "no_review_model"
    assert "train a model" in answer.json()["error"]
    assert client.get("/api/datasets/bob/shapes/review", headers=_auth(bob)).json()["scores"] == "none"
