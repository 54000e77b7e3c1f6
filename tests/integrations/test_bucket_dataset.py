"""A bucket of 2,000 synthetic images with YOLO labels on moto, imported in place: scan, import (progress, the
labels and classes read), browse (Lanner's thumbnails; the pixels through a presigned URL to the pinned object),
trained on (the export's URLs read by the trainer's own NDJSON reader, then an epoch), then an object changed and
one deleted in the bucket are reported, on serve, on export and by a re-check, never served."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from ultralytics.data.converter import convert_ndjson_to_yolo

from lanner.integrations.models import BucketImport, BucketObject
from lanner.synthetic import make_detection_dataset
from tests.integrations.conftest import SECRET, Bucket
from tests.trained import _train

IMAGES = 2000


def upload_folder(bucket: Bucket, folder: Path, prefix: str) -> int:
    files = [p for p in folder.rglob("*") if p.is_file()]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: bucket.s3.put_object(Bucket="photos", Key=prefix + p.relative_to(folder).as_posix(),
                                                     Body=p.read_bytes()), files))
    return len(files)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 600) -> Any:
    """Poll a state (the queue runs on its own thread); fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


@pytest.mark.e2e  # the real trainer: Ultralytics' NDJSON converter downloads the pixels, then an epoch
def test_a_bucket_of_2000_images_imported_in_place(client: Any, alice: Any, bob: Any, bucket: Bucket, app: Any,
                                                   tmp_path: Path, caplog: Any) -> None:
    make_detection_dataset(tmp_path / "shapes", train=IMAGES * 4 // 5, val=IMAGES // 5, size=64)
    assert upload_folder(bucket, tmp_path / "shapes", "datasets/shapes/") == 2 * IMAGES + 1
    bucket.s3.put_object(Bucket="photos", Key="elsewhere/x.jpg", Body=b"not under the prefix")
    headers = alice.headers
    integration = client.post("/api/integrations/buckets", headers=headers, json={
        "provider": "s3", "targets": ["photos"], "credentials": bucket.credentials()}).json()
    scan = client.get(f"/api/integrations/buckets/{integration['id']}/scan", headers=headers,
                      params={"target": "photos", "prefix": "datasets/shapes"}).json()
    assert scan["prefixes"] == [{"prefix": "datasets/shapes/images/", "images": IMAGES, "labels": 0},
                                {"prefix": "datasets/shapes/labels/", "images": 0, "labels": IMAGES}]

    assert client.post("/api/datasets", headers=headers, json={"name": "shapes"}).status_code == 201
    job = client.post("/api/datasets/alice/shapes/bucket-imports", headers=headers, json={
        "integrationId": integration["id"], "target": "photos", "prefix": "datasets/shapes"})
    assert job.status_code == 202, job.text
    path = f"/api/datasets/alice/shapes/bucket-imports/{job.json()['id']}"
    # Another user sees none of it.
    assert client.get(path, headers=bob.headers).status_code == 404
    assert client.post("/api/datasets/alice/shapes/bucket-imports", headers=bob.headers, json={
        "integrationId": integration["id"], "target": "photos"}).status_code == 404
    done = wait_for(lambda: (r := client.get(path, headers=headers).json())["status"] in ("succeeded", "failed")
                    and r, "the bucket import")
    assert done["status"] == "succeeded", done
    assert done["result"]["added"] == IMAGES and (done["stage"], done["done"], done["total"]) == (
        "images", IMAGES, IMAGES)

    dataset = client.get("/api/datasets/alice/shapes", headers=headers).json()["dataset"]
    assert dataset["status"] == "ready"
    page = client.get("/api/datasets/alice/shapes/images", headers=headers,
                      params={"limit": 5, "includeLabels": True, "split": "val"}).json()
    assert page["total"] == IMAGES // 5 and all(image["labels"] for image in page["images"])
    image = page["images"][0]
    thumbnail = client.get(image["thumbnailUrl"])
    assert thumbnail.status_code == 200 and thumbnail.content[:3] == b"\xff\xd8\xff"  # a JPEG, stored by Lanner
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(func.count()).select_from(BucketObject)) == IMAGES
        pinned = session.scalar(select(BucketObject).where(BucketObject.key.endswith("/" + image["name"])))
        key, etag, sha256 = pinned.key, pinned.etag, pinned.sha256
    assert etag and key.startswith("datasets/shapes/images/val/") and sha256 == image["hash"]
    assert not app.state.lanner.blobs.exists(sha256)  # the pixels stayed in the bucket

    served = client.get(f"/api/images/{image['id']}/source", headers=headers, follow_redirects=False)
    assert served.status_code == 307
    pixels = httpx.get(served.headers["location"])
    original = bucket.s3.get_object(Bucket="photos", Key=key)["Body"].read()
    assert hashlib.sha256(original).hexdigest() == sha256
    assert pixels.status_code == 200 and pixels.content == original
    assert client.get(f"/api/images/{image['id']}/source", headers=bob.headers).status_code == 404
    # The link every page and images.urls hand out (the blob route's) leads to the same pinned pixels.
    link = client.post("/api/images/urls", headers=headers, json={"imageIds": [image["id"]]}).json()["urls"][
        image["id"]]
    redirected = client.get(link, follow_redirects=False)
    assert redirected.status_code == 307, redirected.text
    assert httpx.get(redirected.headers["location"]).content == original

    # Train: the trainer's own reader (Ultralytics' NDJSON converter, what data=ul://... runs) downloads every
    # image through the export's URLs, which are presigned URLs to the pinned objects; then a real epoch.
    export = client.get("/api/datasets/alice/shapes/export", headers=headers).json()
    ndjson = tmp_path / "shapes.ndjson"
    ndjson.write_bytes(client.get(export["downloadUrl"]).content)
    lines = [json.loads(line) for line in ndjson.read_text().splitlines()[1:]]
    assert len(lines) == IMAGES and all(line["url"].startswith(bucket.endpoint + "/photos/") for line in lines)
    data_yaml = asyncio.run(convert_ndjson_to_yolo(ndjson, tmp_path / "converted"))
    downloaded = {hashlib.sha256(p.read_bytes()).hexdigest() for p in (tmp_path / "converted").rglob("*")
                  if p.suffix.lower() in (".jpg", ".png")}
    with app.state.lanner.db.session() as session:
        assert downloaded == set(session.scalars(select(BucketObject.sha256)))  # exactly the pinned pixels
    (tmp_path / "run").mkdir()
    weights = _train(tmp_path / "run", Path(data_yaml), epochs=1, imgsz=64, batch=64)
    assert weights.stat().st_size > 1_000_000

    # Changed and deleted afterwards: reported, never served.
    other = page["images"][1]
    other_key = key.rpartition("/")[0] + "/" + other["name"]
    bucket.s3.put_object(Bucket="photos", Key=key, Body=original + b"changed")
    bucket.s3.delete_object(Bucket="photos", Key=other_key)
    changed = client.get(f"/api/images/{image['id']}/source", headers=headers, follow_redirects=False)
    assert changed.status_code == 409 and changed.json()["code"] == "bucket_object_changed"
    assert "changed in the bucket" in changed.json()["error"]
    assert client.get(link, follow_redirects=False).status_code == 409  # the page's link too
    gone = client.get(f"/api/images/{other['id']}/source", headers=headers, follow_redirects=False)
    assert gone.status_code == 409 and "deleted" in gone.json()["error"]
    refused = client.get("/api/datasets/alice/shapes/export", headers=headers)  # nor handed to a trainer
    assert refused.status_code == 409 and refused.json()["code"] == "bucket_object_changed"
    report = client.post("/api/datasets/alice/shapes/bucket-check", headers=headers).json()
    assert report == {"checked": IMAGES, "changed": [key], "missing": [other_key]}
    assert client.post("/api/datasets/alice/shapes/bucket-check", headers=bob.headers).status_code == 404
    assert SECRET not in caplog.text and SECRET not in str(report) and SECRET not in str(done)


def test_an_import_from_a_refused_endpoint_fails_saying_why(client: Any, alice: Any, bucket: Bucket, app: Any,
                                                            settings: Any) -> None:
    bucket.s3.put_object(Bucket="photos", Key="images/train/a.jpg", Body=b"x")
    integration = client.post("/api/integrations/buckets", headers=alice.headers, json={
        "provider": "s3", "targets": ["photos"], "credentials": bucket.credentials()}).json()
    client.post("/api/datasets", headers=alice.headers, json={"name": "later"})
    settings.bucket_allowed_networks = ""  # the operator withdrew the allowance after the connection was made
    job = client.post("/api/datasets/alice/later/bucket-imports", headers=alice.headers, json={
        "integrationId": integration["id"], "target": "photos"}).json()
    app.state.bucket_imports.run_once()
    with app.state.lanner.db.session() as session:
        row = session.get(BucketImport, job["id"])
        assert row.status == "failed" and "not allowed" in row.error
    dataset = client.get("/api/datasets/alice/later", headers=alice.headers).json()["dataset"]
    assert (dataset["status"], dataset["imageCount"]) == ("ready", 0)
