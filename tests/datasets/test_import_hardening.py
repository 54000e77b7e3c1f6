"""Hostile uploads and data that must really go (issue 14): YAML alias bombs are refused before they expand,
imports run in worker processes fairly between users and end with a reason a person can act on, upload URLs are
single use with the declared size and the configured lifetime, and a purge deletes the bytes and kills old links."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import time
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from lanner.datasets.imports import jobs as import_jobs
from lanner.datasets.imports import worker as import_worker
from lanner.datasets.imports.formats.untrusted import load_yaml
from lanner.datasets.imports.queue import ImportQueue, recovery_passes
from lanner.datasets.models import Dataset, ImportJob
from lanner.datasets.records import ImportRefused
from lanner.maintenance.gc import sweep
from lanner.status import StatusEvent
from lanner.storage import upload_sessions
from lanner.storage.references import referenced_among
from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, queue_import, upload_dataset, wait_for_import

BOMB = "\n".join(["a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]",
                  *(f"{b}: &{b} [*{a},*{a},*{a},*{a},*{a},*{a},*{a},*{a},*{a}]" for a, b in zip("abcdefgh", "bcdefghi",
                                                                                                strict=True)),
                  "names: *i", "train: images/train", "val: images/train"])


def hostile_zip(tmp_path: Path, name: str, data_yaml: str) -> Path:
    """A small YOLO dataset zipped with ``data_yaml`` as is (the SDK's packager would parse it first: a YAML
    that expands without bound would take the test process down instead of the server)."""
    make_detection_dataset(tmp_path / name, train=2, val=1)
    (tmp_path / name / "data.yaml").write_text(data_yaml)
    archive = tmp_path / f"{name}.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted((tmp_path / name).rglob("*")):
            if path.is_file():
                out.write(path, path.relative_to(tmp_path / name).as_posix())
    return archive


def blob_files(app: Any) -> set[str]:
    root = app.state.lanner.blobs.root
    return {p.name for p in root.glob("??/??/*")}


def unreferenced(app: Any) -> set[str]:
    with app.state.lanner.db.session() as session:
        files = blob_files(app)
        return files - referenced_among(session, files)


def test_a_yaml_alias_bomb_is_refused_before_it_expands():
    assert len(BOMB) < 1600  # the probe's 1.5 KB file: 9**9 = 387 million strings if expanded
    tracemalloc.start()
    with pytest.raises(ImportRefused, match="alias"):
        load_yaml(BOMB, "data.yaml")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 2 * 2**20, peak  # refused while composing the first alias: nothing was built
    assert load_yaml("names: [cat, dog]\nnc: 2\n", "data.yaml") == {"names": ["cat", "dog"], "nc": 2}
    with pytest.raises(ImportRefused, match="nested"):
        load_yaml("x: " + "[" * 200 + "]" * 200, "data.yaml")


def test_an_alias_bomb_upload_fails_with_the_reason_and_others_keep_importing(sdk, alice, bob, client, tmp_path):
    failed = upload_dataset(sdk(alice), client, "alice", "bomb", hostile_zip(tmp_path, "bomb", BOMB))
    assert failed["status"] == "failed" and "alias" in failed["processingError"]["message"]
    make_detection_dataset(tmp_path / "ok", train=3, val=1)
    ready = upload_dataset(sdk(bob), client, "bob", "ok", package(tmp_path / "ok", tmp_path / "ok-zip"))
    assert ready["status"] == "ready" and ready["imageCount"] == 4


def test_huge_class_counts_are_refused_not_built(sdk, alice, client, tmp_path):
    archive = hostile_zip(tmp_path, "nc", "train: images/train\nval: images/val\nnc: 1000000000000\n")
    failed = upload_dataset(sdk(alice), client, "alice", "nc", archive)
    assert failed["status"] == "failed" and "at most 100000" in failed["processingError"]["message"]


def test_imports_take_turns_between_users(app, client, sdk, alice, bob, tmp_path):
    make_detection_dataset(tmp_path / "d", train=2, val=1)
    archive = package(tmp_path / "d", tmp_path / "zip")
    settings = app.state.lanner.settings
    settings.import_workers = 1
    app.state.imports.stop()  # nothing dispatches while the three jobs are queued
    first, second = (queue_import(app, alice, client, sdk, f"a{i}", archive) for i in (1, 2))
    third = queue_import(app, bob, client, sdk, "b1", archive)
    app.state.imports.wake()
    for slug, platform in (("a1", sdk(alice)), ("a2", sdk(alice)), ("b1", sdk(bob))):
        assert wait_for_import(platform, platform.account.summary()["username"], slug)["status"] == "ready"
    with app.state.lanner.db.session() as session:
        started = list(session.scalars(select(StatusEvent.entity_id).where(
            StatusEvent.entity == "import_jobs", StatusEvent.to_status == "running").order_by(StatusEvent.id)))
    assert started == [first, third, second]  # bob's upload did not wait behind alice's second one


def test_an_internal_error_is_not_shown_to_the_user(app, client, sdk, alice, tmp_path, monkeypatch):
    make_detection_dataset(tmp_path / "d", train=2, val=1)
    app.state.imports.stop()
    job_id = queue_import(app, alice, client, sdk, "d", package(tmp_path / "d", tmp_path / "zip"))
    ctx = app.state.lanner
    with ctx.db.session() as session:
        assert import_jobs.claim(session, session.get(ImportJob, job_id), "test-worker")

    def explode(*_: Any, **__: Any) -> None:
        raise RuntimeError("psycopg.OperationalError: password authentication failed for user lanner_prod")

    monkeypatch.setattr(import_worker, "commit_import", explode)
    assert import_worker.run_job(ctx.db, ctx.blobs, ctx.settings, job_id, "test-worker") == "failed"
    dataset = sdk(alice).datasets.retrieve("alice", "d")["dataset"]
    message = dataset["processingError"]["message"]
    assert dataset["status"] == "failed" and job_id in message and "server log" in message
    assert "psycopg" not in message and "password" not in message


@pytest.mark.parametrize(("worker", "reason"), [
    ("import time; time.sleep(600)", "LANNER_IMPORT_TIMEOUT_SECONDS"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "stopped by SIGKILL, most often because it used more "
                                                                "memory"),
    ("raise SystemExit(3)", "stopped unexpectedly (exit code 3)"),
], ids=["timeout", "killed", "crashed"])
def test_a_worker_that_ends_without_an_outcome_fails_its_job_with_the_reason(app, client, sdk, alice, tmp_path,
                                                                              worker, reason):
    app.state.lanner.settings.import_timeout_seconds = 2.0
    app.state.imports.worker_command = [sys.executable, "-c", worker]
    make_detection_dataset(tmp_path / "d", train=2, val=1)
    dataset = upload_dataset(sdk(alice), client, "alice", "d", package(tmp_path / "d", tmp_path / "zip"))
    assert dataset["status"] == "failed" and reason in dataset["processingError"]["message"]


def test_the_worker_memory_limit_turns_a_huge_allocation_into_memory_error():
    code = ("from lanner.datasets.imports.worker import _limit_memory\n"
            "_limit_memory(2 * 1024**3)\n"
            "try:\n    bytearray(3 * 1024**3)\nexcept MemoryError:\n    print('refused')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "refused", result.stderr


def test_a_running_job_whose_server_died_is_resumed(app, client, sdk, alice, tmp_path):
    make_detection_dataset(tmp_path / "d", train=3, val=1)
    app.state.imports.stop()
    job_id = queue_import(app, alice, client, sdk, "d", package(tmp_path / "d", tmp_path / "zip"))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with app.state.lanner.db.session() as session:  # claimed by a server process on this host that is gone
        assert import_jobs.claim(session, session.get(ImportJob, job_id), f"{app.state.imports.host}:{dead.pid}:x:y")
    app.state.imports.wake()
    assert wait_for_import(sdk(alice), "alice", "d")["status"] == "ready"
    with app.state.lanner.db.session() as session:
        job = session.get(ImportJob, job_id)
        assert (job.status, job.attempts, job.source_sha256) == ("succeeded", 2, None)


def test_a_processing_dataset_without_a_job_is_failed_on_start(app, client, sdk, alice):
    sdk(alice).datasets.create(dataset="stuck", name="stuck")
    with app.state.lanner.db.session() as session:  # what a server older than import jobs left behind
        session.scalar(select(Dataset).where(Dataset.slug == "stuck")).status = "processing"
    ImportQueue(app.state.lanner).run_once()  # the first pass of a server starting
    dataset = sdk(alice).datasets.retrieve("alice", "stuck")["dataset"]
    assert dataset["status"] == "failed" and "upload the file again" in dataset["processingError"]["message"]


def test_the_queue_recovers_on_start_then_every_thirty_seconds_of_passes(app, monkeypatch):
    asked: list[str] = []
    real = import_jobs.stranded_datasets
    monkeypatch.setattr(import_jobs, "stranded_datasets",
                        lambda session: asked.append(threading.current_thread().name) or real(session))
    app.state.lanner.settings.import_poll_seconds = 1.0
    queue = ImportQueue(app.state.lanner)  # not started: only the passes run here
    for _ in range(61):
        queue.run_once()
    assert len(asked) == 3  # passes 1, 31 and 61, not 61 recovery queries
    assert [recovery_passes(s) for s in (1.0, 0.5, 0.2, 45.0, 0.0)] == [30, 60, 150, 1, 1]
    queue.start()  # started (again): its first pass recovers
    try:
        deadline = time.monotonic() + 30
        while len(asked) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        queue.stop()
    assert asked[3:] == ["lanner-imports"]


# --- upload slots ---------------------------------------------------------------------------------------------

def _signed(sdk: Any, account: Any, dataset_id: str, size: int) -> dict[str, Any]:
    return sdk(account).upload.signed_url(body={"assetType": "datasets", "assetId": dataset_id,
                                                "filename": "a.zip", "totalBytes": size})


def test_a_used_upload_url_stores_nothing(app, client, sdk, alice, tmp_path):
    dataset = sdk(alice).datasets.create(dataset="d", name="d")
    signed = _signed(sdk, alice, dataset["id"], 5)
    assert client.put(signed["uploadUrl"], content=b"first").status_code == 200
    before = blob_files(app)
    again = client.put(signed["uploadUrl"], content=b"again")  # before completion
    assert again.status_code == 409 and "already used" in again.json()["error"]
    sdk(alice).upload.complete(session_id=signed["sessionId"])
    after = client.put(signed["uploadUrl"], content=b"later")  # after completion
    assert after.status_code == 409
    assert blob_files(app) == before
    assert not list((app.state.lanner.blobs.root / "tmp").iterdir())
    assert hashlib.sha256(b"again").hexdigest() not in blob_files(app)


def test_upload_urls_live_as_long_as_the_settings_say(app, client, sdk, alice):
    from datetime import datetime

    app.state.lanner.settings.upload_url_ttl_seconds = 600
    dataset = sdk(alice).datasets.create(dataset="d", name="d")
    signed = _signed(sdk, alice, dataset["id"], 5)
    expires = int(httpx.URL(signed["uploadUrl"]).params["expires"])
    assert expires == datetime.fromisoformat(signed["expiresAt"].replace("Z", "+00:00")).timestamp()  # one clock
    assert 590 <= expires - datetime.now().timestamp() <= 610


def test_an_upload_over_its_declared_size_is_refused_before_or_while_streaming(app, client, sdk, alice):
    dataset = sdk(alice).datasets.create(dataset="d", name="d")
    signed = _signed(sdk, alice, dataset["id"], 4)
    response = client.put(signed["uploadUrl"], content=b"12345")
    assert response.status_code == 413
    streamed = client.put(signed["uploadUrl"], content=iter([b"12", b"345"]))  # chunked: no Content-Length
    assert streamed.status_code == 413
    assert blob_files(app) == set() and not list((app.state.lanner.blobs.root / "tmp").iterdir())
    assert client.put(signed["uploadUrl"], content=b"1234").status_code == 200  # the slot was not used up


def test_abandoned_uploads_expire_and_their_files_are_collected(app, client, sdk, alice):
    settings = app.state.lanner.settings
    settings.blob_grace_seconds = 0
    dataset = sdk(alice).datasets.create(dataset="d", name="d")
    signed = _signed(sdk, alice, dataset["id"], 9)  # its URL lives minutes: a busy machine still PUTs in time
    assert client.put(signed["uploadUrl"], content=b"abandoned").status_code == 200
    digest = hashlib.sha256(b"abandoned").hexdigest()
    with app.state.lanner.db.session() as session:
        upload = session.get(upload_sessions.UploadSession, signed["sessionId"])
        upload.expires_at = upload.expires_at.replace(year=2020)
    swept = sweep(app.state.lanner.db, app.state.lanner.blobs, settings)
    assert swept.upload_sessions == 1 and digest not in blob_files(app)
    refused = client.post("/api/datasets/alice/d/ingest", json={"sessionId": signed["sessionId"]},
                          headers=alice.headers)
    assert refused.status_code == 409 and "expired" in refused.json()["error"]


# --- purge ----------------------------------------------------------------------------------------------------

def test_emptying_the_trash_deletes_the_bytes_and_old_links_404(app, client, sdk, alice, tmp_path):
    app.state.lanner.settings.blob_grace_seconds = 0
    platform = sdk(alice)
    make_detection_dataset(tmp_path / "keep", train=2, val=1, seed=1)
    archive = package(tmp_path / "keep", tmp_path / "keep-zip")
    upload_dataset(platform, client, "alice", "keep", archive)
    kept = blob_files(app) - {hashlib.sha256(archive.read_bytes()).hexdigest()}  # an imported archive is garbage
    make_detection_dataset(tmp_path / "gone", train=3, val=1, seed=2)
    dataset = upload_dataset(platform, client, "alice", "gone", package(tmp_path / "gone", tmp_path / "gone-zip"))
    image_id = platform.datasets.images("alice", "gone", limit=1)["images"][0]["id"]
    signed = platform.images.urls(image_ids=[image_id])
    links = [signed["urls"][image_id], signed["thumbnails"][image_id],
             platform.datasets.export("alice", "gone")["downloadUrl"]]
    assert all(client.get(link).status_code == 200 for link in links)
    platform.datasets.delete("alice", "gone")
    assert client.request("DELETE", "/api/trash", json={"id": dataset["id"], "type": "dataset"},
                          headers=alice.headers).json()["deletedCount"] == 1
    assert [client.get(link).status_code for link in links] == [404, 404, 404]
    assert kept < blob_files(app) and len(blob_files(app) - kept) == 2  # the two uploaded archives are left
    assert unreferenced(app) == blob_files(app) - kept
    sweep(app.state.lanner.db, app.state.lanner.blobs, app.state.lanner.settings)
    assert blob_files(app) == kept  # the other dataset's bytes stay; everything of the purged one went
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(ImportJob).where(ImportJob.dataset_id == dataset["id"])) is None


def test_the_sweep_collects_images_an_interrupted_import_stored(app, tmp_path):
    from lanner.datasets.imports.ingest import prepare_import

    ctx = app.state.lanner
    ctx.settings.blob_grace_seconds = 0
    make_detection_dataset(tmp_path / "d", train=3, val=1)
    with prepare_import(blobs=ctx.blobs, settings=ctx.settings, source=tmp_path / "d"):
        stored = blob_files(app)  # images and thumbnails stored, no row refers to them yet: the process "dies"
    assert len(stored) == 8 and unreferenced(app) == stored
    sweep(ctx.db, ctx.blobs, ctx.settings)
    assert blob_files(app) == set()


def test_a_refused_import_leaves_no_new_dataset_with_the_cli(app, tmp_path, monkeypatch, alice):
    """``lanner datasets import`` creates the dataset in the transaction that adds its images."""
    from typer.testing import CliRunner

    from lanner.cli import commands as cli
    from lanner.cli import common as cli_common

    monkeypatch.setattr(cli_common, "get_settings", lambda: app.state.lanner.settings)
    make_detection_dataset(tmp_path / "bomb", train=1, val=1)
    (tmp_path / "bomb" / "data.yaml").write_text(BOMB)
    result = CliRunner().invoke(cli.app, ["datasets", "import", str(tmp_path / "bomb"), "--owner", "alice",
                                          "--name", "bomb"])
    assert result.exit_code == 1 and "alias" in result.output and "Traceback" not in result.output
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(Dataset).where(Dataset.slug == "bomb")) is None


def test_an_import_poll_of_zero_is_refused_at_start() -> None:
    """0 would make the import queue's loop spin (it has no 'off': uploads must be imported); the setting says so
    when the server starts instead."""
    import pydantic  # reason: only this test needs the error class

    from lanner.config import Settings

    with pytest.raises(pydantic.ValidationError, match="import_poll_seconds"):
        Settings(import_poll_seconds=0)
