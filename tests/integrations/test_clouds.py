"""GCS and Azure through the same interface as S3 (issue 30), against their emulators (``clouds``): the SDK's
discover, create, objects; a synthetic YOLO dataset imported in place and pinned by ETag; the image's link (a
signed URL: GCS V4 signed with the service account's key, Azure a service SAS, checked by Azurite); a changed and
a deleted object reported, never served; every connection through the guard; credentials never echoed."""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from lanner.integrations import stores
from lanner.integrations.models import BucketObject, StorageIntegration
from lanner.synthetic import make_detection_dataset
from tests.integrations.clouds import Cloud, azure_container, azurite, fake_gcs_server, gcs_bucket, gcs_service_account
from tests.sdk_types import assert_sdk_type
from tests.servers import wait_for

e2e = pytest.mark.e2e  # emulators in subprocesses (fake-gcs-server, Azurite under node)
TRAIN, VAL = 16, 4


@pytest.fixture(scope="module")
def gcs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fake_gcs_server(tmp_path_factory.mktemp("gcs") / "fake-gcs-server.log") as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def azure_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with azurite(tmp_path_factory.mktemp("azurite") / "azurite.log") as endpoint:
        yield endpoint


@pytest.fixture(params=["gcs", "azure"])
def cloud(request: pytest.FixtureRequest) -> Cloud:
    name = f"photos-{uuid.uuid4().hex[:8]}"
    if request.param == "gcs":
        return gcs_bucket(request.getfixturevalue("gcs_endpoint"), name)
    return azure_container(request.getfixturevalue("azure_endpoint"), name)


def upload_folder(cloud: Cloud, folder: Path, prefix: str) -> int:
    files = [p for p in folder.rglob("*") if p.is_file()]
    for path in files:
        cloud.put(prefix + path.relative_to(folder).as_posix(), path.read_bytes())
    return len(files)


@e2e
def test_a_cloud_bucket_imported_in_place(cloud: Cloud, sdk: Any, client: Any, alice: Any, bob: Any, app: Any,
                                          settings: Any, tmp_path: Path, caplog: Any, capfd: Any) -> None:
    caplog.set_level(logging.DEBUG)
    make_detection_dataset(tmp_path / "shapes", train=TRAIN, val=VAL, size=64)
    assert upload_folder(cloud, tmp_path / "shapes", "datasets/shapes/") == 2 * (TRAIN + VAL) + 1
    cloud.put("readme.md", b"not an image")
    platform, headers = sdk(alice), alice.headers

    discovered = platform.storage_integrations.discover(body={"provider": cloud.provider,
                                                              "credentials": cloud.credentials()})
    assert cloud.target in assert_sdk_type(discovered, "StorageIntegrationsDiscoverResponse")["targets"]
    created = platform.storage_integrations.create(body={"provider": cloud.provider, "targets": [cloud.target],
                                                         "credentials": cloud.credentials()})
    assert_sdk_type(created, "StorageIntegrationsCreateResponse")
    assert (created["provider"], created["credentialIdentity"]) == (cloud.provider, cloud.identity)
    top = assert_sdk_type(platform.storage_integrations.objects(created["id"], target=cloud.target),
                          "StorageIntegrationsObjectsResponse")
    assert [(e["kind"], e["key"]) for e in top["entries"]] == [("folder", "datasets/"), ("file", "readme.md")]
    inner = platform.storage_integrations.objects(created["id"], target=cloud.target,
                                                  prefix="datasets/shapes/images/val/")
    assert len(inner["entries"]) == VAL and all(e["kind"] == "file" and e["size"] > 0 for e in inner["entries"])
    scan = client.get(f"/api/integrations/buckets/{created['id']}/scan", headers=headers,
                      params={"target": cloud.target, "prefix": "datasets/shapes"}).json()
    assert scan["prefixes"] == [{"prefix": "datasets/shapes/images/", "images": TRAIN + VAL, "labels": 0},
                                {"prefix": "datasets/shapes/labels/", "images": 0, "labels": TRAIN + VAL}]

    assert client.post("/api/datasets", headers=headers, json={"name": "shapes"}).status_code == 201
    job = client.post("/api/datasets/alice/shapes/bucket-imports", headers=headers, json={
        "integrationId": created["id"], "target": cloud.target, "prefix": "datasets/shapes"})
    assert job.status_code == 202, job.text
    path = f"/api/datasets/alice/shapes/bucket-imports/{job.json()['id']}"
    done = wait_for(lambda: (r := client.get(path, headers=headers).json())["status"] in ("succeeded", "failed")
                    and r, timeout=300, what="the bucket import")
    assert done["status"] == "succeeded" and done["result"]["added"] == TRAIN + VAL, done
    page = client.get("/api/datasets/alice/shapes/images", headers=headers,
                      params={"limit": 5, "includeLabels": True, "split": "val"}).json()
    assert page["total"] == VAL and all(image["labels"] for image in page["images"])
    image, other = page["images"][0], page["images"][1]

    with app.state.lanner.db.session() as session:
        assert len(session.scalars(select(BucketObject)).all()) == TRAIN + VAL
        pinned = session.scalar(select(BucketObject).where(BucketObject.key.endswith("/" + image["name"])))
        key, etag, sha256 = pinned.key, pinned.etag, pinned.sha256
        assert cloud.secret not in session.scalar(select(StorageIntegration)).secret
    assert sha256 == image["hash"] and not app.state.lanner.blobs.exists(sha256)  # the pixels stayed there
    original = cloud.read(key)
    assert hashlib.sha256(original).hexdigest() == sha256

    # The link: a signed URL straight to the pinned object, pointing at the provider's endpoint (the pin, taken
    # from the listing, matched the object's HEAD; Azure and fake-gcs-server list ETags bare, HEAD them quoted).
    served = client.get(f"/api/images/{image['id']}/source", headers=headers, follow_redirects=False)
    assert served.status_code == 307, served.text
    location = served.headers["location"]
    assert location.startswith(f"{cloud.endpoint}/{cloud.target}/{key}?")
    assert httpx.get(location).content == original
    if cloud.provider == "azure":  # Azurite checks the SAS: a forged one is refused
        assert "sig=" in location and "sr=b" in location
        assert httpx.get(location.replace("sig=", "sig=AAAA")).status_code == 403
    else:  # GCS V4, signed with the service account's key (fake-gcs-server does not check it)
        assert "X-Goog-Algorithm=GOOG4-RSA-SHA256" in location and "X-Goog-Signature=" in location
        assert "lanner-reader%40lanner-test.iam.gserviceaccount.com" in location
    store = stores.build_store(settings, provider=cloud.provider, target=cloud.target,
                               credentials=cloud.credentials(), endpoint=cloud.endpoint, region=None)
    assert etag.startswith('"') and stores.etag(stores.head(store, key).get("e_tag")) == etag
    assert client.get(f"/api/images/{image['id']}/source", headers=bob.headers).status_code == 404
    link = client.post("/api/images/urls", headers=headers, json={"imageIds": [image["id"]]}).json()["urls"][
        image["id"]]
    redirected = client.get(link, follow_redirects=False)
    assert redirected.status_code == 307 and httpx.get(redirected.headers["location"]).content == original
    export = client.get("/api/datasets/alice/shapes/export", headers=headers)
    assert export.status_code == 200, export.text

    # Changed and deleted afterwards: reported, never served.
    other_key = key.rpartition("/")[0] + "/" + other["name"]
    cloud.put(key, original + b"changed")
    cloud.delete(other_key)
    changed = client.get(f"/api/images/{image['id']}/source", headers=headers, follow_redirects=False)
    assert changed.status_code == 409 and "changed in the bucket" in changed.json()["error"]
    gone = client.get(f"/api/images/{other['id']}/source", headers=headers, follow_redirects=False)
    assert gone.status_code == 409 and "deleted" in gone.json()["error"]
    report = client.post("/api/datasets/alice/shapes/bucket-check", headers=headers).json()
    assert report == {"checked": TRAIN + VAL, "changed": [key], "missing": [other_key]}

    captured = capfd.readouterr()
    for text in (caplog.text, captured.out, captured.err, str(discovered), str(created), str(top), str(done),
                 str(report), location):
        assert cloud.secret not in text


@e2e
def test_a_cloud_endpoint_is_refused_without_the_allowance(cloud: Cloud, client: Any, alice: Any,
                                                           settings: Any) -> None:
    """The emulator is on loopback: without LANNER_BUCKET_ALLOWED_NETWORKS the guard refuses it for every
    provider, on create and on discover."""
    settings.bucket_allowed_networks = ""
    for path, body in (("/api/integrations/buckets", {"provider": cloud.provider, "targets": [cloud.target],
                                                      "credentials": cloud.credentials()}),
                       ("/api/integrations/buckets/discover", {"provider": cloud.provider,
                                                               "credentials": cloud.credentials()})):
        answer = client.post(path, headers=alice.headers, json=body)
        assert answer.status_code == 400 and answer.json()["code"] == "endpoint_refused", answer.text
        assert cloud.secret not in answer.text


@e2e
def test_a_name_rebinding_to_the_emulator_is_refused_at_connect(cloud: Cloud, settings: Any) -> None:
    """A store built from a row long after the create-time check (an import): the guard resolves the name again
    for each connection, for GCS and Azure as for S3."""
    from lanner.integrations import service

    settings.bucket_allowed_networks = ""
    host_port = cloud.endpoint.split("//", 1)[1].split("/", 1)
    port = host_port[0].rsplit(":", 1)[1]
    rest = "/" + host_port[1] if len(host_port) > 1 else ""
    stores.set_resolver(settings, lambda host, p: ["127.0.0.1"])
    guard = stores.guard_for(settings)
    before = guard.refused
    secret = {k: v for k, v in cloud.credentials().items() if k != "endpoint"}
    with pytest.raises(Exception) as refused:
        service._verify(settings, cloud.provider, secret, cloud.target, f"http://bucket.rebind.test:{port}{rest}",
                        None)
    assert getattr(refused.value, "code", "") == "endpoint_refused" and cloud.secret not in str(refused.value)
    assert guard.refused > before


def test_a_gcs_key_cannot_name_its_own_endpoint(settings: Any) -> None:
    """object_store reads a base URL from the service-account key itself; Lanner's endpoint is only the one
    checked at create time, so a key's ``gcs_base_url`` is dropped (the signed link, made locally, shows where
    every request goes)."""
    key = {**gcs_service_account(), "gcs_base_url": "http://169.254.169.254", "disable_oauth": True}
    store = stores.build_store(settings, provider="gcs", credentials={"serviceAccountKey": key}, target="photos",
                               endpoint=None, region=None)
    assert stores.presign(store, "a.jpg", 60).startswith("https://storage.googleapis.com/photos/a.jpg?")


@pytest.mark.parametrize("account", ["evil.example.com#", "UPPER", "a", "x" * 25, "devstoreaccount1/../"])
def test_an_azure_account_name_is_only_a_name(client: Any, alice: Any, account: str) -> None:
    """The account name becomes the host (<account>.blob.core.windows.net): Azure's own rule, checked before any
    request."""
    for path in ("/api/integrations/buckets", "/api/integrations/buckets/discover"):
        answer = client.post(path, headers=alice.headers, json={
            "provider": "azure", "targets": ["photos"], "credentials": {"accountName": account, "accountKey": "k"}})
        assert answer.status_code == 400 and "accountName" in answer.json()["error"], answer.text
