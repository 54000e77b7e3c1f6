"""Auto-annotation end to end: the official SDK against a real ``lanner serve``, the real worker launched by the
local executor, killed with SIGKILL in the middle of the batch. The queue sees the worker gone, relaunches the
run for the images not yet recorded, and the run completes: every unlabelled image labelled exactly once (its
label revision 1, one ``autolabel_images`` row each), the labelled ones untouched, and the ledger charged exactly
images × price."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from sqlalchemy import func, select
from ultralytics_platform import Platform

from lanner import models_registry  # noqa: F401  (every table: the ledger's foreign keys name runs)
from lanner.accounts import service as accounts_service
from lanner.autolabel.models import AutolabelImage, AutolabelJob
from lanner.billing import service as billing
from lanner.config import Settings
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import Database
from lanner.projects.models import ModelRecord
from lanner.synthetic import CLASSES, make_detection_dataset
from tests.datasets.helpers import upload_dataset
from tests.sdk_types import assert_sdk_type
from tests.servers import start_server
from tests.trained import IMGSZ, tiny_weights  # noqa: F401  (a fixture)

pytestmark = pytest.mark.e2e
IMAGES, UNLABELLED = 48, 40
PRICE = 0.013
CREDIT = billing.dollars_to_micros(5)


def _worker_pids(job_id: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if "lanner.autolabel.worker" in " ".join(process.info["cmdline"] or []) and \
                    job_id in process.environ().get("LANNER_AUTOLABEL_SPEC", ""):
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def _setup(tmp_path: Path, weights: Path) -> tuple[Any, Database, Platform]:
    home = tmp_path / "home"
    server = start_server(home, LANNER_AUTOLABEL_POLL_SECONDS="0.3", LANNER_AUTOLABEL_CHUNK_IMAGES="1",
                          LANNER_AUTOLABEL_PRICE_PER_IMAGE=str(PRICE))
    db = Database(Settings(home=home, public_url=server.url).resolved_database_url)
    with db.session() as session:
        user = accounts_service.create_user(session, username="alice")
        billing.top_up(session, user_id=user.id, micros=CREDIT)
        key = accounts_service.create_api_key(session, user=user)[1]
    platform = Platform(base_url=server.url, api_key=key, timeout=60)
    root = tmp_path / "shapes"
    make_detection_dataset(root, train=IMAGES, val=0, size=IMGSZ, seed=2)
    for label in sorted((root / "labels" / "train").glob("*.txt"))[:UNLABELLED]:
        label.unlink()
    with httpx.Client(timeout=60) as http:
        upload_dataset(platform, http, "alice", "shapes", Path(shutil.make_archive(str(tmp_path / "z"), "zip", root)))
    platform.projects.create(owner="alice", project="shapes", name="shapes", visibility="private")
    model = platform.models.create(body={"project": "shapes", "model": "tiny", "name": "tiny"})
    slot = platform.upload.signed_url(body={"assetType": "models", "assetId": model["id"], "filename": "best.pt"})
    httpx.put(slot["uploadUrl"], content=weights.read_bytes(), timeout=60).raise_for_status()
    platform.upload.complete(session_id=slot["sessionId"])
    with db.session() as session:  # what a finished run leaves on its model
        record = session.get(ModelRecord, model["id"])
        record.task, record.class_names, record.train_args = "detect", list(CLASSES), {"imgsz": IMGSZ}
    return server, db, platform


def _items(db: Database) -> dict[str, tuple[Any, int, str | None]]:
    with db.session() as session:
        manifest = session.scalar(select(Dataset.manifest_id).where(Dataset.slug == "shapes"))
        return {key: (labels, rev, by) for key, labels, rev, by in session.execute(
            select(DatasetItem.key, DatasetItem.labels, DatasetItem.label_rev, DatasetItem.labelled_by)
            .where(DatasetItem.manifest_id == manifest))}


def test_a_worker_killed_mid_batch_is_resumed_and_labels_each_image_once(tmp_path: Path,
                                                                         tiny_weights: Path) -> None:  # noqa: F811
    server, db, platform = _setup(tmp_path, tiny_weights)
    try:
        before = _items(db)
        job_id = platform.datasets.create_batch("alice", "shapes", body={
            "modelId": "ul://alice/shapes/tiny", "confidence": 0.001})["jobId"]
        deadline = time.time() + 180
        while time.time() < deadline:  # the worker has recorded some images, not all
            active = assert_sdk_type(platform.datasets.batch("alice", "shapes"), "DatasetsBatchResponse")["activeJob"]
            if active and active["progress"]["processed"] >= 2:
                break
            time.sleep(0.05)
        pids = _worker_pids(job_id)
        assert pids, "no worker process for the run"
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)  # frozen first: what it recorded is now fixed
        with db.session() as session:
            recorded_before_kill = session.scalar(select(func.count()).select_from(AutolabelImage))
        assert 2 <= recorded_before_kill < UNLABELLED, "the worker finished before it could be killed"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

        deadline = time.time() + 240
        last: dict[str, Any] | None = None
        while time.time() < deadline:
            status = platform.datasets.batch("alice", "shapes")
            if status["activeJob"] is None:
                last = status["lastRun"]
                break
            time.sleep(0.3)
        assert last is not None, f"the run did not end: {server.log.read_text()[-3000:]}"
        assert not last["failed"] and not last["stopped"], last
        assert last["results"]["processed"] == UNLABELLED
        with db.session() as session:
            job = session.get(AutolabelJob, job_id)
            assert job.status == "completed" and job.attempt == 2
            assert session.scalar(select(func.count()).select_from(AutolabelImage)) == UNLABELLED
            available = billing.balances(session, user_id=job.owner_id).available
        after = _items(db)
        for key, (labels, rev, by) in before.items():
            if labels is None:
                assert after[key][0] and after[key][1] == 1 and after[key][2] == "model:alice/shapes/tiny", key
            else:
                assert after[key] == (labels, rev, by)
        assert CREDIT - available == UNLABELLED * billing.dollars_to_micros(PRICE)
    finally:
        server.stop()
        db.dispose()
