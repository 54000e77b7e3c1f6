"""A bucket dataset joined with the rest of Lanner, on both blob stores (the server's files on disk, and in a bucket
of its own): every image link the API hands out leads to the user's pinned object (never to the digest's key in
Lanner's bucket, where those pixels are not), the YOLO zip holds the bucket's pixels, a changed object is refused
on both, and ``account.storage`` counts only what Lanner stores."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select
from ultralytics_platform import APIError

from lanner.billing import service as billing
from lanner.config import Settings
from lanner.datasets.items import split_image_id
from lanner.datasets.models import Dataset
from lanner.integrations import pixels, stores
from lanner.integrations.models import BucketObject
from lanner.projects.models import ModelRecord
from lanner.synthetic import make_detection_dataset
from tests.conftest import GENEROUS_LIMITS, TEST_URL, _db_counter, copy_of
from tests.integrations.conftest import Bucket
from tests.storage.moto import s3_settings
from tests.training.conftest import new_model

LANNER_BUCKET = "lanner-own-blobs"


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """SQLite, or PostgreSQL for a test that asks (``indirect``): the queries on the pins run on both."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return copy_of(request.getfixturevalue("sqlite_template"), tmp_path)
    cluster = request.getfixturevalue("postgres")
    name = f"lanner_test_{next(_db_counter)}"
    cluster.execute(f"CREATE DATABASE {name} TEMPLATE lanner_template")
    return cluster.url(name)


@pytest.fixture(params=["local", "s3"])
def settings(request: pytest.FixtureRequest, tmp_path: Path, database_url: str, moto_endpoint: str,
             bucket: Bucket) -> Any:
    """``bucket`` first: the user's bucket and Lanner's own live on the same moto server."""
    store: dict[str, Any] = {}
    if request.param == "s3":
        bucket.s3.create_bucket(Bucket=LANNER_BUCKET)
        store = s3_settings(moto_endpoint, LANNER_BUCKET)
    value = Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL,
                     secret_key="test-secret", api_key_cache_seconds=0, secrets_key=Fernet.generate_key().decode(),
                     bucket_allowed_networks="127.0.0.0/8", bucket_timeout_seconds=10, **GENEROUS_LIMITS, **store)
    yield value
    stores.set_resolver(value)
    if request.param == "s3":
        for page in bucket.s3.get_paginator("list_objects_v2").paginate(Bucket=LANNER_BUCKET):
            for item in page.get("Contents", []):
                bucket.s3.delete_object(Bucket=LANNER_BUCKET, Key=item["Key"])
        bucket.s3.delete_bucket(Bucket=LANNER_BUCKET)


def imported(client: Any, account: Any, bucket: Bucket, app: Any, folder: Path, slug: str = "shapes") -> dict:
    """A small YOLO dataset put in the user's bucket and imported in place into ``slug``; key -> bytes."""
    make_detection_dataset(folder, train=2, val=1, size=64)
    originals = {}
    for path in folder.rglob("*"):
        if path.is_file():
            key = path.relative_to(folder).as_posix()
            bucket.s3.put_object(Bucket="photos", Key=key, Body=path.read_bytes())
            originals[key] = path.read_bytes()
    integration = client.post("/api/integrations/buckets", headers=account.headers, json={
        "provider": "s3", "targets": ["photos"], "credentials": bucket.credentials()}).json()
    assert client.post("/api/datasets", headers=account.headers, json={"name": slug}).status_code == 201
    job = client.post(f"/api/datasets/{account.username}/{slug}/bucket-imports", headers=account.headers,
                      json={"integrationId": integration["id"], "target": "photos"})
    assert job.status_code == 202, job.text
    app.state.bucket_imports.run_once()
    done = client.get(f"/api/datasets/{account.username}/{slug}/bucket-imports/{job.json()['id']}",
                      headers=account.headers).json()
    assert done["status"] == "succeeded" and done["result"]["added"] == 3, done
    return {"integration": integration, "originals": originals}


def fetch(client: Any, url: str) -> httpx.Response:
    """What a browser gets for a link: Lanner's own answered in-process, a redirect followed to the bucket."""
    if not url.startswith(TEST_URL):
        return httpx.get(url, timeout=10)
    response = client.get(url, follow_redirects=False)
    return httpx.get(response.headers["location"], timeout=10) if response.status_code == 307 else response


def test_every_image_link_leads_to_the_pinned_object_on_either_store(client: Any, alice: Any, bucket: Bucket,
                                                                     app: Any, tmp_path: Path) -> None:
    originals = imported(client, alice, bucket, app, tmp_path / "shapes")["originals"]
    by_sha = {hashlib.sha256(data).hexdigest(): key for key, data in originals.items()}
    images = client.get("/api/datasets/alice/shapes/images", headers=alice.headers,
                        params={"includeImageUrls": True, "includeThumbnails": True}).json()["images"]
    assert len(images) == 3
    ids = [image["id"] for image in images]
    urls = client.post("/api/images/urls", headers=alice.headers, json={"imageIds": ids}).json()
    for image in images:
        key = by_sha[image["hash"]]
        editor = client.get(f"/api/datasets/alice/shapes/annotate/{split_image_id(image['id'])[1]}",
                            headers=alice.headers).json()["image"]
        for link in (image["imageUrl"], urls["urls"][image["id"]], editor["url"]):
            answer = fetch(client, link)
            assert answer.status_code == 200 and answer.content == originals[key], (link, answer.status_code)
        thumbnail = fetch(client, image["thumbnailUrl"])  # Lanner's own blob, from whichever store
        assert thumbnail.status_code == 200 and thumbnail.content[:3] == b"\xff\xd8\xff"

    changed = images[0]
    bucket.s3.put_object(Bucket="photos", Key=by_sha[changed["hash"]], Body=b"other pixels")
    fresh = client.post("/api/images/urls", headers=alice.headers, json={"imageIds": [changed["id"]]}).json()
    refused = client.get(fresh["urls"][changed["id"]], follow_redirects=False)
    assert refused.status_code == 409 and refused.json()["code"] == "bucket_object_changed"


def test_the_yolo_zip_holds_the_buckets_pixels_and_refuses_a_changed_object(client: Any, alice: Any,
                                                                            bucket: Bucket, app: Any,
                                                                            tmp_path: Path) -> None:
    originals = imported(client, alice, bucket, app, tmp_path / "shapes")["originals"]
    export = client.get("/api/datasets/alice/shapes/export", headers=alice.headers, params={"format": "yolo"})
    assert export.status_code == 200, export.text
    archive = zipfile.ZipFile(io.BytesIO(fetch(client, export.json()["downloadUrl"]).content))
    pictures = {name: archive.read(name) for name in archive.namelist() if name.startswith("images/")}
    assert len(pictures) == 3
    for name, data in pictures.items():
        assert data == originals[name], name  # the layout matches the bucket's: images/<split>/<name>
    assert sorted(n for n in archive.namelist() if n.startswith("labels/")) == sorted(
        k for k in originals if k.startswith("labels/"))

    key = sorted(pictures)[0]
    bucket.s3.put_object(Bucket="photos", Key=key, Body=b"replaced after the import")
    refused = client.get("/api/datasets/alice/shapes/export", headers=alice.headers, params={"format": "yolo"})
    assert refused.status_code == 409 and refused.json()["code"] == "bucket_object_changed"
    assert key in refused.json()["error"] and "changed in the bucket" in refused.json()["error"]


@pytest.mark.parametrize("settings", ["local"], indirect=True)  # what is counted is the same on both
@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_account_storage_counts_what_lanner_stores_not_the_buckets_pixels(client: Any, alice: Any, bucket: Bucket,
                                                                         app: Any, sdk: Any, tmp_path: Path) -> None:
    imported(client, alice, bucket, app, tmp_path / "shapes")
    listed = client.get("/api/datasets/alice/shapes/images", headers=alice.headers).json()["images"]
    assert sum(image["bytes"] for image in listed) > 0  # the images keep their size ...
    storage = sdk(alice).account.storage(details="true")
    datasets = storage["breakdown"]["byCategory"]["datasets"]
    assert datasets == {"bytes": 0.0, "count": 1.0}  # ... but their pixels are the user's bucket's, not Lanner's
    assert storage["usage"]["storage"]["current"] == 0.0
    assert [(item["slug"], item["sizeBytes"]) for item in storage["breakdown"]["topItems"]] == [("shapes", 0.0)]


@pytest.mark.parametrize("settings", ["local"], indirect=True)  # the flag is the store's concern in neither
@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_processing_off_refuses_the_ai_features_and_nothing_else(client: Any, alice: Any, bucket: Bucket, app: Any,
                                                                 sdk: Any, fake_executor: Any,
                                                                 tmp_path: Path) -> None:
    """The SDK: ``processing`` "allows or blocks AI features on this storage's images: smart annotation,
    auto-annotation, similar-image search, dataset analysis, cloud training, and image generation ... Turning
    them off stops new work." Lanner has three of them: training, proposals and the labelling assistant."""
    integration = imported(client, alice, bucket, app, tmp_path / "shapes")["integration"]
    platform = sdk(alice)
    model_id = new_model(platform, "m")
    with app.state.lanner.db.session() as session:  # a readable model with weights, for the proposals route
        session.get(ModelRecord, model_id).weights_sha256 = "0" * 64
        billing.top_up(session, user_id=alice.user_id, micros=10_000_000)
    image_id = client.get("/api/datasets/alice/shapes/images", headers=alice.headers).json()["images"][0]["id"]
    key = split_image_id(image_id)[1]
    args = {"model": "yolo11n.yaml", "data": "ul://alice/datasets/shapes", "epochs": 1, "imgsz": 64, "batch": 4}
    assert platform.storage_integrations.update(integration["id"], processing=False)["processing"] is False

    with pytest.raises(APIError) as refused:
        platform.training.start(model_id=model_id, gpu_type="cpu", train_args=args)
    assert refused.value.status_code == 409 and "cloud training is turned off" in str(refused.value)
    proposals = client.post("/api/datasets/alice/shapes/proposals", headers=alice.headers,
                            json={"model": model_id, "keys": [key], "conf": 0.1})
    assert proposals.status_code == 409 and proposals.json()["code"] == "bucket_processing_off"
    assert "smart annotation" in proposals.json()["error"] and integration["id"] in proposals.json()["error"]
    assistant = client.put("/api/datasets/alice/shapes/assistant", headers=alice.headers,
                           json={"enabled": True, "minLabels": 3, "every": 50})
    assert assistant.status_code == 200, assistant.text
    app.state.assistant.run_once()  # the three imported images are labelled: round 1 is due, and refused
    state = client.get("/api/datasets/alice/shapes/assistant", headers=alice.headers).json()
    assert state["status"] == "failed" and "auto-annotation is turned off" in state["reason"], state
    # Not AI features: browsing, the pixels, exports.
    assert client.get(f"/api/images/{image_id}/source", headers=alice.headers,
                      follow_redirects=False).status_code == 307
    assert client.get("/api/datasets/alice/shapes/export", headers=alice.headers).status_code == 200
    assert client.get("/api/datasets/alice/shapes/images", headers=alice.headers).json()["total"] == 3

    platform.storage_integrations.update(integration["id"], processing=True)
    started = platform.training.start(model_id=model_id, gpu_type="cpu", train_args=args)
    assert started["runId"]


@pytest.mark.parametrize("settings", ["local"], indirect=True)
def test_an_object_replaced_after_the_listing_is_refused_by_the_read_itself(client: Any, alice: Any, bucket: Bucket,
                                                                           app: Any, settings: Any,
                                                                           tmp_path: Path) -> None:
    """An export lists each folder once; the read of each object is conditional on its pinned ETag (if-match), so
    an object replaced between the listing and its read is refused too, never copied into the zip."""
    originals = imported(client, alice, bucket, app, tmp_path / "shapes")["originals"]
    train = sorted(k for k in originals if k.startswith("images/train/"))
    with app.state.lanner.db.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        source = pixels.export_urls(session, settings, dataset)
        assert source is not None
        first = b"".join(source.chunks(hashlib.sha256(originals[train[0]]).hexdigest()))  # lists images/train/
        assert first == originals[train[0]]
        bucket.s3.put_object(Bucket="photos", Key=train[1], Body=b"replaced after the listing")
        with pytest.raises(pixels.ObjectChanged, match="changed in the bucket"):
            source.chunks(hashlib.sha256(originals[train[1]]).hexdigest())
        assert source.chunks(hashlib.sha256(b"a blob of Lanner's").hexdigest()) is None
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(BucketObject.state).where(BucketObject.key == train[1])) == "changed"
