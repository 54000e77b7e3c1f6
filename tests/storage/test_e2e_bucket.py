"""End to end with the blobs in a bucket (moto's S3 server): the real ``lanner serve`` with LANNER_BLOB_STORE=s3,
the official SDK's upload flow PUTting the archive into the bucket, the import worker reading it from there, the
links the SDK gets pointing at the bucket, and the unchanged ``yolo`` trainer downloading the dataset from the
bucket and PUTting its weights straight into it (its own uploader, on a presigned slot the server settles).
Nothing is written under LANNER_HOME/blobs. The export worker PUTs its artefact straight into the bucket's staging
area, which the server settles once the worker is gone."""

from __future__ import annotations

import hashlib
import time

import httpx
import pytest
from ultralytics_platform import Platform

from lanner.storage.s3 import S3BlobStore
from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset
from tests.servers import lanner_cli, start_server, trainer_env, yolo, yolo_workspace
from tests.storage.moto import CREDENTIALS, moto_server, new_bucket, s3_env

pytestmark = pytest.mark.e2e


def test_sdk_upload_import_links_and_training_go_through_the_bucket(tmp_path, moto_endpoint, moto_log, bucket):
    home = tmp_path / "home"
    home.mkdir()
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    server = start_server(home, **s3_env(moto_endpoint, bucket))
    try:
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        archive = package(make_detection_dataset(tmp_path / "shapes", train=8, val=4).parent, tmp_path / "zip")
        sent: list[tuple[str, str]] = []
        with httpx.Client(timeout=60, event_hooks={"request": [lambda r: sent.append((r.method, str(r.url)))]}) \
                as http:
            dataset = upload_dataset(platform, http, "alice", "shapes", archive)
        assert dataset["status"] == "ready" and dataset["imageCount"] == 12, dataset
        assert [method for method, _ in sent] == ["PUT"]
        assert sent[0][1].startswith(f"{moto_endpoint}/{bucket}/lanner/staging/sessions/")  # not Lanner's route

        images = platform.datasets.images("alice", "shapes", limit=2, include_image_urls="true",
                                          include_thumbnails="true")["images"]
        assert len(images) == 2
        for image in images:
            assert image["imageUrl"].startswith(moto_endpoint) and image["thumbnailUrl"].startswith(moto_endpoint)
            assert hashlib.sha256(httpx.get(image["imageUrl"]).content).hexdigest() == image["hash"]
        export = platform.datasets.export("alice", "shapes")["downloadUrl"]
        assert export.startswith(moto_endpoint) and len(httpx.get(export).text.splitlines()) == 13

        work = tmp_path / "work"
        work.mkdir()
        env = trainer_env(work, server.url, key)
        yolo_workspace(work, env)
        result = yolo(work, env, "train", "model=yolo11n.yaml", "data=ul://alice/datasets/shapes", "epochs=1",
                      "imgsz=64", "batch=4", "workers=0", "plots=False", "val=False", "project=alice/bucketed")
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert len(list((work / "datasets").rglob("images/train/*"))) == 8  # fetched by presigned URLs
        files = platform.models.files("alice", "bucketed", "train")["files"]
        assert files and files[0]["downloadUrl"].startswith(moto_endpoint)
        weights = httpx.get(files[0]["downloadUrl"]).content
        assert len(weights) == files[0]["size"] and weights[:2] == b"PK"  # a torch checkpoint is a zip
        puts = [line for line in moto_log.read_text().splitlines() if f"PUT /{bucket}/lanner/staging/checkpoints/"
                in line and "best.pt" in line]
        assert puts and " 200 " in puts[-1]  # the trainer's own PUT of best.pt, straight into the bucket
        blobs = home / "blobs"
        assert not blobs.exists() or not any(p.is_file() for p in blobs.rglob("*") if p.parent.name != "tmp")
    finally:
        server.stop()


def test_the_export_worker_puts_its_artefact_straight_into_the_bucket(tmp_path, tiny_weights):
    """A real export (ONNX, imgsz 64) by the real worker: its artefact reaches the bucket by the worker's own PUT
    on the staging key (moto's request log shows it; the API host never PUTs there), is filed under its digest,
    and the export completes with that digest's size and a presigned download link."""
    home = tmp_path / "home"
    home.mkdir()
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    with moto_server(tmp_path / "moto.log") as endpoint:
        bucket = new_bucket(endpoint)
        server = start_server(home, LANNER_EXPORT_POLL_SECONDS="0.3", **s3_env(endpoint, bucket))
        try:
            platform = Platform(base_url=server.url, api_key=key, timeout=60)
            platform.projects.create(owner="alice", project="shapes", name="shapes", visibility="private")
            model = platform.models.create(body={"project": "shapes", "model": "tiny", "name": "tiny"})
            slot = platform.upload.signed_url(body={"assetType": "models", "assetId": model["id"],
                                                    "filename": "best.pt"})
            httpx.put(slot["uploadUrl"], content=tiny_weights.read_bytes(), timeout=60).raise_for_status()
            platform.upload.complete(session_id=slot["sessionId"])

            export = platform.exports.create("alice", "shapes", "tiny", format="onnx", args={"imgsz": 64})
            deadline = time.time() + 300
            while (done := platform.exports.retrieve("alice", "shapes", "tiny", export["id"])["export"])[
                    "status"] not in ("completed", "failed", "cancelled") and time.time() < deadline:
                time.sleep(0.3)
            assert done["status"] == "completed", done.get("error")
            file = done["file"]
            assert file["downloadUrl"].startswith(endpoint), file
            onnx = httpx.get(file["downloadUrl"], timeout=60).content
            assert len(onnx) == file["size"] > 100_000
            digest = hashlib.sha256(onnx).hexdigest()
            store = S3BlobStore(bucket=bucket, prefix="lanner/", endpoint=endpoint, region="us-east-1",
                                **CREDENTIALS, path_style=True, allow_http=True, scratch=tmp_path / "spool")
            assert store.key(digest) == f"lanner/blobs/{digest[:2]}/{digest[2:4]}/{digest}"
            assert b"".join(store.iter_bytes(digest)) == onnx  # under its digest's key

            requests = (tmp_path / "moto.log").read_text().splitlines()
            staged = [line for line in requests if f"PUT /{bucket}/lanner/staging/exports/{export['id']}/" in line]
            assert staged and " 200 " in staged[0], requests[-20:]  # the worker's own PUT into the bucket
        finally:
            server.stop()
