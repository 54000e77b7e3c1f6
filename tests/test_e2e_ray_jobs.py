"""The worker jobs beside training on a real local Ray head (``LANNER_EXECUTOR=ray``) whose node offers Lanner's
``cpu`` type (README: a node that takes CPU jobs declares ``lanner-gpu:cpu``): embeddings, auto-annotation,
review scores and an export each run as a Ray Job (the same executor interface as training,
``job_queue.worker_executor``), deliver through the API as they do on the local executor, and leave the dataset
and the model as a local run would: every image embedded, every unlabelled image labelled once by the model,
every labelled image scored, the export's file downloadable."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from ultralytics_platform import Platform

from lanner import models_registry  # noqa: F401  (every table)
from lanner.config import Settings
from lanner.db import Database
from lanner.projects.models import ModelRecord
from lanner.synthetic import CLASSES, make_detection_dataset
from tests.datasets.helpers import upload_dataset
from tests.ray_cluster import ray_head_with_cpu  # noqa: F401  (the fixture)
from tests.servers import lanner_cli
from tests.trained import IMGSZ, tiny_weights  # noqa: F401  (a fixture)
from tests.training.orchestration import server_with_credit

pytestmark = pytest.mark.e2e
ray = pytest.importorskip("ray")
IMAGES, UNLABELLED = 12, 5


def _until(what: str, check: Any, timeout: float = 240) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if value := check():
            return value
        time.sleep(0.3)
    raise AssertionError(f"still waiting for {what} after {timeout} s")


def _model_with_weights(platform: Platform, home: Path, weights: Path) -> str:
    platform.projects.create(owner="alice", project="shapes", name="shapes", visibility="private")
    model = platform.models.create(body={"project": "shapes", "model": "tiny", "name": "tiny"})
    slot = platform.upload.signed_url(body={"assetType": "models", "assetId": model["id"], "filename": "best.pt"})
    httpx.put(slot["uploadUrl"], content=weights.read_bytes(), timeout=60).raise_for_status()
    platform.upload.complete(session_id=slot["sessionId"])
    db = Database(Settings(home=home).resolved_database_url)
    try:
        with db.session() as session:  # what a finished run leaves on its model
            record = session.get(ModelRecord, model["id"])
            record.task, record.class_names, record.train_args = "detect", list(CLASSES), {"imgsz": IMGSZ}
    finally:
        db.dispose()
    return model["id"]


def test_embeddings_auto_annotation_and_exports_run_as_ray_jobs(tmp_path: Path, ray_head_with_cpu: str,  # noqa: F811
                                                                 tiny_weights: Path) -> None:  # noqa: F811
    official = tmp_path / "yolo11n.pt"
    official.write_bytes(tiny_weights.read_bytes())
    server, key = server_with_credit(
        tmp_path, usd="5", LANNER_EXECUTOR="ray", LANNER_RAY_ADDRESS=ray_head_with_cpu, LANNER_RAY_NUM_GPUS="0",
        LANNER_RAY_WORKER_DIR=str(tmp_path / "ray-node"), LANNER_EMBEDDING_POLL_SECONDS="0.2",
        LANNER_EMBEDDING_IMGSZ="64", LANNER_AUTOLABEL_POLL_SECONDS="0.3", LANNER_EXPORT_POLL_SECONDS="0.3",
        LANNER_REVIEW_POLL_SECONDS="0.3")
    try:
        lanner_cli(server.home, "models", "add-official", str(official))
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        root = tmp_path / "shapes"
        make_detection_dataset(root, train=IMAGES, val=0, size=IMGSZ, seed=3)
        for label in sorted((root / "labels" / "train").glob("*.txt"))[:UNLABELLED]:
            label.unlink()
        with httpx.Client(timeout=60) as http:
            upload_dataset(platform, http, "alice", "shapes",
                           Path(shutil.make_archive(str(tmp_path / "z"), "zip", root)))
        _model_with_weights(platform, server.home, tiny_weights)

        platform.datasets.create_embeddings("alice", "shapes")
        platform.datasets.create_batch("alice", "shapes", body={"modelId": "ul://alice/shapes/tiny",
                                                                  "confidence": 0.001})
        export = platform.exports.create("alice", "shapes", "tiny", format="torchscript", args={"imgsz": 64})

        embedded = _until("the embeddings", lambda: (lambda s: s if s["analyzedAt"] else None)(
            platform.datasets.embeddings("alice", "shapes")))
        assert embedded["embeddingsCount"] == IMAGES and embedded["activeJob"] is None, embedded
        batch = _until("the auto-annotation", lambda: (lambda s: s["lastRun"] if s["activeJob"] is None
                                                       and s["lastRun"] else None)(
            platform.datasets.batch("alice", "shapes")))
        assert not batch["failed"] and batch["results"]["processed"] == UNLABELLED, batch
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
            review = "/api/datasets/alice/shapes/review"  # every image is labelled now: all are scored
            api.post(review, json={"modelId": "ul://alice/shapes/tiny"}).raise_for_status()
            scored = _until("the review scores", lambda: (lambda s: s if s["scores"] == "fresh"
                                                          and s["activeJob"] is None else None)(
                api.get(review).raise_for_status().json()))
            assert scored["model"], scored
            assert len(api.get(review + "/images", params={"limit": 100}).raise_for_status().json()["images"]) \
                == IMAGES
        done = _until("the export", lambda: (lambda e: e if e["status"] in ("completed", "failed") else None)(
            platform.exports.retrieve("alice", "shapes", "tiny", export["id"])["export"]))
        assert done["status"] == "completed", done.get("error")
        artefact = httpx.get(done["file"]["downloadUrl"], timeout=60).content
        assert len(artefact) == done["file"]["size"] > 10_000 and hashlib.sha256(artefact).hexdigest()

        from ray.job_submission import JobSubmissionClient

        entrypoints = [job.entrypoint for job in JobSubmissionClient(ray_head_with_cpu).list_jobs()]
        for worker in ("lanner.embeddings.worker", "lanner.autolabel.worker", "lanner.exports.worker"):
            assert any(worker in entry for entry in entrypoints), (worker, entrypoints)
        assert sum("lanner.autolabel.worker" in entry for entry in entrypoints) == 2  # labels, then the scores
        for folder in ("embeddings/jobs", "review"):  # nothing ran on the local executor
            assert not (server.home / folder).exists(), folder
    finally:
        server.stop()
