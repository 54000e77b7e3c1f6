"""End to end, with kill -9: a server killed mid-import resumes the import when it starts again, and a
``lanner datasets import`` killed mid-way leaves no dataset and no image worker; either way, once the collector's
grace period is over, no dataset is ``processing``, no blob is unreferenced and no scratch folder is left."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import httpx
import psutil
import pytest
from sqlalchemy import select
from ultralytics_platform import Platform

from lanner.config import Settings
from lanner.datasets.imports.probe_pool import cpus_available
from lanner.datasets.models import Dataset, ImportJob
from lanner.db import Database
from lanner.maintenance.gc import sweep
from lanner.storage.blobs import LocalBlobStore
from lanner.storage.references import referenced_among
from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, wait_for_import
from tests.servers import VENV_BIN, lanner_cli, lanner_env, start_server, wait_for

pytestmark = pytest.mark.e2e
IMAGES = 1000  # seconds of probing and storing in the image pool (500 images or more): killed mid-way


def blob_count(home: Path) -> int:
    return sum(1 for _ in (home / "blobs").glob("??/??/*"))


def leftovers(home: Path) -> tuple[list[str], list[str], list[str]]:
    """Datasets still processing, unreferenced blobs, scratch entries."""
    db = Database(f"sqlite:///{home / 'lanner.db'}")
    try:
        with db.session() as session:
            processing = list(session.scalars(select(Dataset.slug).where(Dataset.status == "processing")))
            stored = [p.name for p in (home / "blobs").glob("??/??/*")]
            live = referenced_among(session, stored)
            orphans = [name for name in stored if name not in live]
    finally:
        db.dispose()
    scratch = [p.name for p in (home / "tmp").iterdir()] if (home / "tmp").exists() else []
    return processing, orphans, scratch


def test_a_server_killed_mid_import_resumes_it_and_leaves_nothing_behind(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    settings = {"LANNER_BLOB_GRACE_SECONDS": "0", "LANNER_MAINTENANCE_INTERVAL_SECONDS": "0.2"}
    archive = package(make_detection_dataset(tmp_path / "big", train=IMAGES, val=8).parent, tmp_path / "zip")
    server = start_server(home, **settings)
    try:
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        created = platform.datasets.create(dataset="big", name="big")
        signed = platform.upload.signed_url(body={"assetType": "datasets", "assetId": created["id"],
                                                  "filename": archive.name, "totalBytes": archive.stat().st_size})
        assert httpx.put(signed["uploadUrl"], content=archive.read_bytes(), timeout=60).status_code == 200
        platform.datasets.ingest("alice", "big", body={"sessionId": signed["sessionId"]})
        before = blob_count(home)
        wait_for(lambda: blob_count(home) > before + 40, what="the import to store images", timeout=180)
        workers = psutil.Process(server.process.pid).children(recursive=True)
        assert workers, "the import runs in a worker process"
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        wait_for(lambda: not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers),
                 what="the worker to die with its server", timeout=30)
        assert leftovers(home)[0] == ["big"]  # the state a kill -9 leaves
    finally:
        server.stop()

    server = start_server(home, **settings)
    try:
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        dataset = wait_for_import(platform, "alice", "big")
        assert dataset["status"] == "ready" and dataset["imageCount"] == IMAGES + 8
        db = Database(f"sqlite:///{home / 'lanner.db'}")
        with db.session() as session:
            job = session.scalar(select(ImportJob))
            assert (job.status, job.attempts) == ("succeeded", 2)
        db.dispose()
        wait_for(lambda: leftovers(home) == ([], [], []), what="the collector to free what the killed import left",
                 timeout=180)
    finally:
        server.stop()


def test_a_cli_import_killed_mid_way_leaves_no_dataset_and_its_blobs_are_collected(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    lanner_cli(home, "users", "create", "alice")
    source = make_detection_dataset(tmp_path / "big", train=IMAGES, val=8).parent
    process = subprocess.Popen([str(VENV_BIN / "lanner"), "datasets", "import", str(source), "--owner", "alice",
                                "--name", "big"], env=lanner_env(home), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (home / "blobs").exists() and blob_count(home) > 40, what="the import to store images",
                 timeout=180)
        workers = psutil.Process(process.pid).children(recursive=True)  # its image pool, storing those images
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert workers or cpus_available() == 1
    wait_for(lambda: not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers),
             what="the image workers to die with the import", timeout=30)
    processing, orphans, scratch = leftovers(home)
    assert processing == [] and orphans and scratch  # killed mid-way: stored images and its unpacking folder
    db = Database(f"sqlite:///{home / 'lanner.db'}")
    try:
        with db.session() as session:
            assert session.scalar(select(Dataset)) is None  # no empty dataset: it is created with its images
        settings = Settings(home=home, blob_grace_seconds=0)
        sweep(db, LocalBlobStore(settings.blob_root), settings)
    finally:
        db.dispose()
    assert leftovers(home) == ([], [], [])
    refused = subprocess.run([str(VENV_BIN / "lanner"), "datasets", "import", str(tmp_path / "missing.zip"),
                              "--owner", "alice", "--name", "x"], env=lanner_env(home), capture_output=True,
                             text=True)
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
