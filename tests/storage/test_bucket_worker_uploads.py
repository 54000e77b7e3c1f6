"""Workers upload straight into the bucket (issue 30): with ``LANNER_BLOB_STORE=s3`` (moto's S3 server) the export
worker's ``uploadUrl`` and the training worker's resume-checkpoint slot are presigned PUTs into the bucket's
staging area, never Lanner's route; the server reads the object back, hashes it and records it: an export when
its worker is gone (``exports.queue``), a checkpoint when the worker confirms it (``upload/complete``). The real
workers against a real ``lanner serve``: ``tests/storage/test_e2e_bucket.py``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import obstore
import pytest

from lanner.config import Settings
from lanner.exports import jobs
from lanner.exports.models import ModelExport
from lanner.exports.queue import ExportQueue
from lanner.exports.worker import upload
from lanner.projects.models import ModelRecord
from lanner.synthetic import make_detection_dataset
from lanner.training.executors import JobState
from lanner.training.executors.base import JobStatus
from lanner.training.models import StagedUpload
from tests.conftest import GENEROUS_LIMITS, TEST_URL, copy_of
from tests.datasets.helpers import package, upload_dataset
from tests.exports.conftest import fake_weights
from tests.exports.test_queue import FakeExecutor
from tests.storage.moto import s3_settings
from tests.trained import attach_weights
from tests.training.test_supervisor import started_run

SLOT = "/api/webhooks/models/upload"


@pytest.fixture
def settings(tmp_path: Path, sqlite_template: Path, moto_endpoint: str, bucket: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=copy_of(sqlite_template, tmp_path), public_url=TEST_URL,
                    secret_key="test-secret", api_key_cache_seconds=0, export_poll_seconds=0,
                    supervisor_interval_seconds=0, maintenance_interval_seconds=0, run_lost_after_seconds=600,
                    run_max_relaunches=2, cancel_grace_seconds=0, meter_interval_seconds=0, **GENEROUS_LIMITS,
                    **s3_settings(moto_endpoint, bucket))


def _staged_keys(app: Any) -> list[str]:
    store = app.state.lanner.blobs
    return [meta["path"] for batch in obstore.list(store.store, f"{store.prefix}staging/") for meta in batch]


def _job(app: Any, export_id: str) -> ModelExport:
    with app.state.lanner.db.session() as session:
        job = session.get(ModelExport, export_id)
        session.expunge(job)
        return job


def test_an_export_worker_puts_its_artefact_into_the_bucket_and_the_queue_settles_it(
        app: Any, client: Any, alice: Any, sdk: Any, tmp_path: Path, moto_endpoint: str, bucket: str) -> None:
    ctx = app.state.lanner
    attach_weights(app, alice, fake_weights(tmp_path))
    fake = FakeExecutor()
    queue = ExportQueue(ctx, fake)
    platform = sdk(alice)
    export_id = platform.exports.create("alice", "shapes", "tiny", format="onnx")["id"]
    queue.run_once()
    spec = json.loads(fake.launched[0].env["LANNER_EXPORT_SPEC"])
    job = _job(app, export_id)
    slot = f"{jobs.SLOT_PREFIX}{job.id}/{job.slot}/{job.filename}"
    assert spec["uploadUrl"].startswith(f"{moto_endpoint}/{bucket}/lanner/staging/{slot}?")  # not Lanner's route
    assert urlsplit(spec["uploadUrl"]).netloc != urlsplit(TEST_URL).netloc

    artefact = tmp_path / "tiny.onnx"
    artefact.write_bytes(b"\x08\x07 an onnx graph" * 1000)
    upload(artefact, spec["uploadUrl"])  # the worker's own PUT
    assert _staged_keys(app) == [f"lanner/staging/{slot}"]
    queue.run_once()
    assert _job(app, export_id).status == jobs.RUNNING  # the worker still runs: nothing is settled yet

    fake.states["fake-1"] = JobStatus(JobState.SUCCEEDED, 0)
    queue.run_once()
    done = _job(app, export_id)
    digest = hashlib.sha256(artefact.read_bytes()).hexdigest()
    assert done.status == jobs.COMPLETED and (done.sha256, done.size) == (digest, artefact.stat().st_size)
    assert done.external_id is None and done.source_sha256 is None
    assert ctx.blobs.exists(digest) and _staged_keys(app) == []  # filed by digest; the staged object went
    file = platform.exports.retrieve("alice", "shapes", "tiny", export_id)["export"]["file"]
    assert file["downloadUrl"].startswith(moto_endpoint)
    assert httpx.get(file["downloadUrl"]).content == artefact.read_bytes()

    # A worker that exits 0 without its file in the bucket fails its export, saying so.
    other = platform.exports.create("alice", "shapes", "tiny", format="torchscript")["id"]
    queue.run_once()
    fake.states["fake-2"] = JobStatus(JobState.SUCCEEDED, 0)
    queue.run_once()
    failed = _job(app, other)
    assert failed.status == jobs.FAILED and failed.sha256 is None
    assert "its file is not in the bucket" in (failed.error or "")


def test_a_worker_lost_after_its_upload_still_delivers(app: Any, alice: Any, sdk: Any, tmp_path: Path) -> None:
    """A node that died (or a worker adopted after a restart, with no exit code) once the artefact was in the
    bucket: the artefact completes the export instead of a second attempt."""
    attach_weights(app, alice, fake_weights(tmp_path))
    fake = FakeExecutor()
    queue = ExportQueue(app.state.lanner, fake)
    export_id = sdk(alice).exports.create("alice", "shapes", "tiny", format="onnx")["id"]
    queue.run_once()
    artefact = tmp_path / "tiny.onnx"
    artefact.write_bytes(b"onnx bytes")
    upload(artefact, json.loads(fake.launched[0].env["LANNER_EXPORT_SPEC"])["uploadUrl"])
    fake.states["fake-1"] = JobStatus(JobState.LOST, None, "worker process is gone")
    queue.run_once()
    done = _job(app, export_id)
    assert done.status == jobs.COMPLETED and done.attempt == 1 and done.size == len(b"onnx bytes")


def _running(app: Any, alice: Any, sdk: Any, fake_executor: Any, tmp_path: Path) -> tuple[int, str]:
    """A run of alice's on a small uploaded dataset, launched on the fake executor: its id and the key its
    trainer reports with."""
    platform = sdk(alice)
    upload_dataset(platform, httpx, "alice", "shapes", package(
        make_detection_dataset(tmp_path / "shapes", train=4, val=2, size=64).parent, tmp_path / "zip"))
    run_id = started_run(platform, app, alice)
    app.state.training.supervisor.run_once()
    return run_id, fake_executor.launched[0].env["ULTRALYTICS_API_KEY"]


def _checkpoint_slot(client: Any, key: str, run_id: int, **body: Any) -> dict[str, Any]:
    slot = client.post(SLOT, headers={"Authorization": f"Bearer {key}"},
                       json={"runId": run_id, "filename": "last.pt", **body})
    assert slot.status_code == 200, slot.text
    return slot.json()


def _complete(client: Any, key: str, slot: dict[str, Any]) -> Any:
    return client.post(f"{SLOT}/complete", headers={"Authorization": f"Bearer {key}"},
                       json={"modelId": slot["modelId"], "uploadPath": slot["uploadPath"]})


def test_a_resume_checkpoint_goes_into_the_bucket_and_a_relaunch_fetches_it_from_there(
        app: Any, client: Any, alice: Any, bob: Any, sdk: Any, fake_executor: Any, tmp_path: Path,
        moto_endpoint: str, bucket: str) -> None:
    supervisor = app.state.training.supervisor
    run_id, key = _running(app, alice, sdk, fake_executor, tmp_path)

    trainers = _checkpoint_slot(client, key, run_id)  # the trainer's: into the bucket, settled by its event
    assert trainers["uploadUrl"].startswith(f"{moto_endpoint}/{bucket}/lanner/staging/") and "direct" not in trainers
    slot = _checkpoint_slot(client, key, run_id, direct=True)  # the worker's
    assert slot["direct"] is True
    assert slot["uploadUrl"].startswith(f"{moto_endpoint}/{bucket}/lanner/staging/{slot['uploadPath']}?")
    early = _complete(client, key, slot)
    assert early.status_code == 409 and "PUT the file" in early.json()["error"]

    content = b"PK\x03\x04 last.pt of epoch 3"
    assert httpx.put(slot["uploadUrl"], content=content).status_code == 200
    assert _complete(client, bob.key, slot).status_code == 404  # not bob's model: nothing read
    done = _complete(client, key, slot)
    digest = hashlib.sha256(content).hexdigest()
    assert done.status_code == 200 and done.json()["sha256"] == digest and done.json()["size"] == len(content)
    again = _complete(client, key, slot)  # a retry whose answer was lost: the same, recorded once
    assert again.status_code == 200 and again.json()["sha256"] == digest
    with app.state.lanner.db.session() as session:
        staged = session.get(StagedUpload, slot["uploadPath"])
        assert (staged.sha256, staged.size, staged.run_id) == (digest, len(content), run_id)
    assert _staged_keys(app) == []

    fake_executor.set(run_id, 1, JobState.LOST, -9, "worker killed by signal 9")
    supervisor.run_once()
    supervisor.run_once()
    spec = json.loads(fake_executor.launched[-1].env["LANNER_WORKER_SPEC"])
    assert spec["resume"] is True and spec["checkpointUrl"].startswith(moto_endpoint)
    assert httpx.get(spec["checkpointUrl"]).content == content


def _event(client: Any, key: str, model_id: str, event: str, data: dict[str, Any]) -> Any:
    return client.post("/api/webhooks/training/metrics", headers={"Authorization": f"Bearer {key}"},
                       json={"event": event, "modelId": model_id, "data": data})


def test_the_trainers_own_checkpoints_go_into_the_bucket_and_its_events_settle_them(
        app: Any, client: Any, alice: Any, bob: Any, sdk: Any, fake_executor: Any, tmp_path: Path,
        moto_endpoint: str, bucket: str) -> None:
    """The unchanged trainer asks for a slot, PUTs with its own uploader (``safe_upload``) wherever the answer
    points, then names the file in ``checkpoint_saved`` (mid-run) or ``training_complete`` (``best.pt``). With
    blobs in a bucket the slot is a presigned bucket PUT, and the event settles it before it is applied."""
    from ultralytics.utils.uploads import safe_upload

    run_id, key = _running(app, alice, sdk, fake_executor, tmp_path)

    mid = tmp_path / "last.pt"
    mid.write_bytes(b"PK\x03\x04 last.pt of epoch 2" * 100)
    slot = _checkpoint_slot(client, key, run_id)
    assert urlsplit(slot["uploadUrl"]).netloc == urlsplit(moto_endpoint).netloc  # never through the API host
    named = {"modelPath": slot["gcsPath"], "runId": run_id, "uploadPath": slot["uploadPath"]}
    early = _event(client, key, slot["modelId"], "checkpoint_saved", named)
    assert early.status_code == 409 and "not uploaded yet" in early.json()["error"]  # nothing PUT: as before
    assert safe_upload(file=mid, url=slot["uploadUrl"], retry=0)
    assert _event(client, bob.key, slot["modelId"], "checkpoint_saved", named).status_code == 404
    assert _event(client, key, slot["modelId"], "checkpoint_saved", named).status_code == 200
    digest = hashlib.sha256(mid.read_bytes()).hexdigest()
    with app.state.lanner.db.session() as session:
        staged = session.get(StagedUpload, slot["uploadPath"])
        assert (staged.sha256, staged.size, staged.promoted_at is not None) == (digest, mid.stat().st_size, True)
    assert _staged_keys(app) == [] and app.state.lanner.blobs.exists(digest)

    best = tmp_path / "best.pt"
    best.write_bytes(b"PK\x03\x04 best.pt" * 300)
    final = _checkpoint_slot(client, key, run_id, filename="best.pt")
    assert safe_upload(file=best, url=final["uploadUrl"], retry=0)
    done = _event(client, key, final["modelId"], "training_complete", {"results": {
        "metrics": {"metrics/mAP50(B)": 0.5}, "modelPath": final["gcsPath"], "modelSize": best.stat().st_size}})
    assert done.status_code == 200, done.text
    assert _staged_keys(app) == []
    with app.state.lanner.db.session() as session:
        record = session.get(ModelRecord, final["modelId"])
        assert (record.weights_sha256, record.weights_name) == (hashlib.sha256(best.read_bytes()).hexdigest(),
                                                                 "best.pt")


def test_a_checkpoint_the_bucket_cannot_give_back_leaves_training_complete_applied(
        app: Any, client: Any, alice: Any, sdk: Any, fake_executor: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """The bucket failing while the named file is settled must not lose the run's end: the event applies (metrics,
    completion), and the model keeps the weights it had."""
    from ultralytics.utils.uploads import safe_upload

    run_id, key = _running(app, alice, sdk, fake_executor, tmp_path)
    best = tmp_path / "best.pt"
    best.write_bytes(b"PK\x03\x04 best.pt")
    slot = _checkpoint_slot(client, key, run_id, filename="best.pt")
    assert safe_upload(file=best, url=slot["uploadUrl"], retry=0)

    def unreachable(*args: Any, **kwargs: Any) -> None:
        raise OSError("the bucket is unreachable")

    monkeypatch.setattr(app.state.lanner.blobs, "settle_staged", unreachable)
    done = _event(client, key, slot["modelId"], "training_complete", {"results": {
        "metrics": {"metrics/mAP50(B)": 0.5}, "modelPath": slot["gcsPath"]}})
    assert done.status_code == 200, done.text
    with app.state.lanner.db.session() as session:
        record = session.get(ModelRecord, slot["modelId"])
        assert record.metrics == {"metrics/mAP50(B)": 0.5} and record.weights_sha256 is None
