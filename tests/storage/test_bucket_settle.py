"""Settling files PUT straight into a bucket after ``upload.complete`` answered (``upload_sessions.settle``):
an import right after completion reads the file (and settles it as it reads), a settle killed at any point runs
again to the same end, and the collector never deletes the staged file of a live session. The settle loop is
off here: what settles is what each test drives."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from lanner.config import Settings
from lanner.datasets.models import ImportJob
from lanner.maintenance import gc
from lanner.storage.models import UploadSession
from lanner.synthetic import make_detection_dataset
from tests.conftest import GENEROUS_LIMITS, TEST_URL, copy_of
from tests.datasets.helpers import package, wait_for_import
from tests.storage.moto import s3_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings(tmp_path: Path, sqlite_template: Path, moto_endpoint: str, bucket: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=copy_of(sqlite_template, tmp_path), public_url=TEST_URL,
                    secret_key="test-secret", api_key_cache_seconds=0, blob_grace_seconds=0, upload_settle_seconds=0,
                    **GENEROUS_LIMITS, **s3_settings(moto_endpoint, bucket))


def _upload(client: TestClient, account: Any, data: bytes, **body: Any) -> dict[str, Any]:
    slot = client.post("/api/upload/signed-url", headers=account.headers,
                       json={"assetType": "datasets", "filename": "shapes.zip", "totalBytes": len(data), **body})
    assert slot.status_code == 200, slot.text
    assert httpx.put(slot.json()["uploadUrl"], content=data).status_code == 200
    return slot.json()


def _session(app: Any, session_id: str) -> UploadSession:
    with app.state.lanner.db.session() as session:
        upload = session.get(UploadSession, session_id)
        session.expunge(upload)
        return upload


def test_an_upload_is_imported_right_after_completion(app: Any, client: TestClient, alice: Any, sdk: Any,
                                                      tmp_path: Path) -> None:
    """The SDK's flow, with nothing settled before the import: the worker settles the archive as it reads it."""
    platform = sdk(alice)
    archive = package(make_detection_dataset(tmp_path / "shapes", train=3, val=2).parent, tmp_path / "zip")
    created = platform.datasets.create(dataset="shapes", name="shapes")
    slot = _upload(client, alice, archive.read_bytes(), assetId=created["id"])
    assert platform.upload.complete(session_id=slot["sessionId"])["file"]["size"] == archive.stat().st_size
    assert _session(app, slot["sessionId"]).staged  # not hashed yet
    platform.datasets.ingest("alice", "shapes", body={"sessionId": slot["sessionId"]})
    dataset = wait_for_import(platform, "alice", "shapes")
    assert dataset["status"] == "ready" and dataset["imageCount"] == 5, dataset

    upload = _session(app, slot["sessionId"])
    assert (upload.status, upload.staged, upload.sha256) == ("ingested", False, None)  # the job's end let go
    with app.state.lanner.db.session() as session:
        job = session.query(ImportJob).one()
        assert (job.status, job.source_sha256) == ("succeeded", None)
    store = app.state.lanner.blobs
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert store.exists(digest)  # filed by digest as it was read
    assert store.stat_staged(f"sessions/{slot['sessionId']}/shapes.zip") is None
    assert app.state.upload_settler.run_once() == 0  # nothing left to settle


KILLER = """
import json, os, signal, sys
import lanner.models_registry  # every table, as a server process has them
from lanner.config import Settings
from lanner.db import Database
from lanner.storage import s3, upload_sessions
from lanner.storage.backends import open_blob_store

spec = json.loads(sys.stdin.read())
settings = Settings.model_validate(spec["settings"])
blobs = open_blob_store(settings)
if spec["kill"] == "after the copy":
    real_copy = s3.obstore.copy

    def copy(store, from_, to, **kwargs):
        real_copy(store, from_, to, **kwargs)
        if "/blobs/" in to:
            os.kill(os.getpid(), signal.SIGKILL)

    s3.obstore.copy = copy
else:
    blobs.drop_staged = lambda slot: os.kill(os.getpid(), signal.SIGKILL)
upload_sessions.settle(Database(settings.resolved_database_url), blobs, spec["upload"], max_bytes=10**9)
"""


def _settle_and_die(settings: Settings, upload_id: str, kill: str) -> None:
    """``settle`` in a process killed with SIGKILL at ``kill``: after the digest's copy (nothing recorded yet),
    or after the record (the staged object not deleted yet)."""
    spec = {"settings": settings.model_dump(mode="json"), "upload": upload_id, "kill": kill}
    done = subprocess.run([sys.executable, "-c", KILLER], input=json.dumps(spec), text=True, cwd=ROOT,
                          capture_output=True, timeout=120)
    assert done.returncode == -9, done.stderr


@pytest.mark.parametrize("kill", ["after the copy", "after the record"])
def test_a_settle_killed_midway_settles_again_and_loses_nothing(app: Any, client: TestClient, alice: Any,
                                                               settings: Settings, kill: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = app.state.lanner
    data = b"PK\x05\x06" + b"\x00" * 18 + kill.encode()
    digest = hashlib.sha256(data).hexdigest()
    slot = _upload(client, alice, data)
    staged_slot = f"sessions/{slot['sessionId']}/shapes.zip"
    done = client.post("/api/upload/complete", headers=alice.headers, json={"sessionId": slot["sessionId"]})
    assert done.status_code == 200, done.text

    _settle_and_die(settings, slot["sessionId"], kill)
    upload = _session(app, slot["sessionId"])
    assert ctx.blobs.exists(digest) and ctx.blobs.stat_staged(staged_slot) == len(data)
    if kill == "after the copy":
        assert (upload.staged, upload.sha256) == (True, None)
        assert app.state.upload_settler.run_once() == 1  # again, to the same end
    else:
        assert (upload.staged, upload.sha256) == (False, digest)
        assert app.state.upload_settler.run_once() == 0  # done already
    upload = _session(app, slot["sessionId"])
    assert (upload.status, upload.staged, upload.sha256) == ("completed", False, digest)
    assert b"".join(ctx.blobs.iter_bytes(digest)) == data

    monkeypatch.setattr(gc, "PARTIAL_MIN_IDLE_SECONDS", 0.0)
    time.sleep(0.01)  # idle for longer than the grace of 0 s
    gc.sweep(ctx.db, ctx.blobs, settings, shards=[digest[:2]])
    assert ctx.blobs.stat_staged(staged_slot) is None  # what the killed settle left is collected ...
    assert not list(ctx.blobs._listing(f"{ctx.blobs.prefix}staging/"))
    assert b"".join(ctx.blobs.iter_bytes(digest)) == data  # ... and the settled file is kept


def test_the_collector_keeps_the_staged_files_of_live_sessions(app: Any, client: TestClient, alice: Any,
                                                               settings: Settings,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = app.state.lanner
    waiting = _upload(client, alice, b"PUT, not completed yet")
    completed = _upload(client, alice, b"completed, not settled yet")
    assert client.post("/api/upload/complete", headers=alice.headers,
                       json={"sessionId": completed["sessionId"]}).status_code == 200
    expired = _upload(client, alice, b"its session expired")
    with ctx.db.session() as session:
        session.get(UploadSession, expired["sessionId"]).expires_at = session.get(
            UploadSession, expired["sessionId"]).created_at
    monkeypatch.setattr(gc, "PARTIAL_MIN_IDLE_SECONDS", 0.0)
    time.sleep(0.01)  # every staged object idle for longer than the grace of 0 s
    swept = gc.sweep(ctx.db, ctx.blobs, settings, shards=[])
    assert (swept.upload_sessions, swept.partial_uploads) == (1, 1)
    for slot, size in ((waiting, 22), (completed, 26)):
        assert ctx.blobs.stat_staged(f"sessions/{slot['sessionId']}/shapes.zip") == size
    assert ctx.blobs.stat_staged(f"sessions/{expired['sessionId']}/shapes.zip") is None
    assert app.state.upload_settler.run_once() == 1
    assert _session(app, completed["sessionId"]).sha256 == hashlib.sha256(b"completed, not settled yet").hexdigest()
