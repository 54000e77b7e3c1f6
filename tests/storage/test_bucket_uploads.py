"""A server whose blobs live in a bucket (moto's S3 server): upload slots are presigned PUTs into the bucket,
completing an upload checks the staged object's size (one HEAD) and the file is read back and hashed after the
answer (never the client's word), links are presigned GETs, and the collector deletes unreferenced objects from
the bucket. Lanner's own signed route keeps checking its links. The settle loop is off here (tests drive it)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from lanner.config import Settings
from lanner.datasets.models import ImageBlob
from lanner.maintenance.gc import sweep
from lanner.storage import s3
from lanner.storage.models import UploadSession
from lanner.storage.references import delete_unreferenced
from lanner.storage.s3 import S3BlobStore
from lanner.storage.signing import blob_path
from tests.conftest import GENEROUS_LIMITS, TEST_URL, copy_of
from tests.sdk_types import assert_sdk_type
from tests.storage.moto import s3_settings


@pytest.fixture
def settings(tmp_path: Path, sqlite_template: Path, moto_endpoint: str, bucket: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=copy_of(sqlite_template, tmp_path), public_url=TEST_URL,
                    secret_key="test-secret", api_key_cache_seconds=0, blob_grace_seconds=0, upload_settle_seconds=0,
                    **GENEROUS_LIMITS, **s3_settings(moto_endpoint, bucket))


def _slot(client: TestClient, account: Any, **body: Any) -> dict[str, Any]:
    response = client.post("/api/upload/signed-url", headers=account.headers,
                           json={"assetType": "datasets", "filename": "shapes.zip", **body})
    assert response.status_code == 200, response.text
    return response.json()


def _complete(client: TestClient, account: Any, slot: dict[str, Any]) -> httpx.Response:
    return client.post("/api/upload/complete", headers=account.headers, json={"sessionId": slot["sessionId"]})


def test_completion_reads_no_byte_and_the_settle_loop_hashes_the_file_after(
        app: Any, client: TestClient, alice: Any, bob: Any, moto_endpoint: str, bucket: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = app.state.lanner.blobs
    assert isinstance(store, S3BlobStore)
    data = b"PK\x05\x06" + b"\x00" * 18
    slot = _slot(client, alice, totalBytes=len(data))
    assert slot["uploadUrl"].startswith(f"{moto_endpoint}/{bucket}/lanner/staging/sessions/{slot['sessionId']}/")
    early = _complete(client, alice, slot)
    assert early.status_code == 409 and "PUT the file" in early.json()["error"]

    assert httpx.put(slot["uploadUrl"], content=data, headers=slot["headers"]).status_code == 200
    assert _complete(client, bob, slot).status_code == 404  # not bob's: nothing looked at
    calls = _count_bucket_calls(monkeypatch)
    done = _complete(client, alice, slot)
    assert done.status_code == 200 and done.json() == {"success": True, "file": {"size": len(data)}}
    assert calls == {"head": 1}  # no GET, no copy: the answer costs one HEAD whatever the size
    assert_sdk_type(done.json(), "UploadCompleteResponse")
    with app.state.lanner.db.session() as session:
        upload = session.get(UploadSession, slot["sessionId"])
        assert (upload.status, upload.sha256, upload.size, upload.staged) == ("completed", None, len(data), True)
    assert _complete(client, alice, slot).status_code == 200  # completing again changes nothing

    assert app.state.upload_settler.run_once() == 1
    assert calls["get"] == 1  # the settle read it, once
    with app.state.lanner.db.session() as session:
        upload = session.get(UploadSession, slot["sessionId"])
        assert (upload.status, upload.sha256, upload.staged) == ("completed", hashlib.sha256(data).hexdigest(),
                                                                 False)
    assert b"".join(store.iter_bytes(hashlib.sha256(data).hexdigest())) == data
    assert store.stat_staged(f"sessions/{slot['sessionId']}/shapes.zip") is None  # the staged object went
    assert app.state.upload_settler.run_once() == 0


def _count_bucket_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of the bucket requests Lanner's store makes from now on, by kind."""
    calls: dict[str, int] = {}
    for name in ("head", "get", "copy"):
        real = getattr(s3.obstore, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] = calls.get(_name, 0) + 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(s3.obstore, name, counted)
    return calls


def test_a_wrong_or_oversized_object_is_refused_at_completion(app: Any, client: TestClient, alice: Any) -> None:
    over = _slot(client, alice, totalBytes=10)
    assert httpx.put(over["uploadUrl"], content=b"x" * 11).status_code == 200  # the bucket cannot tell
    refused = _complete(client, alice, over)
    assert refused.status_code == 413 and "at most 10" in refused.json()["error"]
    assert _complete(client, alice, over).status_code == 409  # the object went with the refusal

    short = _slot(client, alice, totalBytes=20)
    assert httpx.put(short["uploadUrl"], content=b"y" * 10).status_code == 200
    mismatch = _complete(client, alice, short)
    assert mismatch.status_code == 400 and "10 bytes but 20" in mismatch.json()["error"]
    assert httpx.put(short["uploadUrl"], content=b"y" * 20).status_code == 200  # the right file, on the same URL
    assert _complete(client, alice, short).status_code == 200

    app.state.lanner.settings.max_upload_bytes = 15  # the server's limit, with no size announced
    unannounced = _slot(client, alice)
    assert httpx.put(unannounced["uploadUrl"], content=b"w" * 16).status_code == 200
    refused = _complete(client, alice, unannounced)
    assert refused.status_code == 413 and "at most 15" in refused.json()["error"]
    assert _complete(client, alice, unannounced).status_code == 409


def test_a_file_put_again_after_completion_is_rejected_when_settled(app: Any, client: TestClient,
                                                                    alice: Any) -> None:
    """The presigned URL outlives completion: a PUT of other bytes then is not what completion checked."""
    slot = _slot(client, alice)
    assert httpx.put(slot["uploadUrl"], content=b"v" * 10).status_code == 200
    assert _complete(client, alice, slot).status_code == 200
    assert httpx.put(slot["uploadUrl"], content=b"v" * 12).status_code == 200
    assert app.state.upload_settler.run_once() == 1
    with app.state.lanner.db.session() as session:
        upload = session.get(UploadSession, slot["sessionId"])
        assert (upload.status, upload.sha256, upload.staged) == ("rejected", None, False)
    again = _complete(client, alice, slot)
    assert again.status_code == 409 and "upload it again" in again.json()["error"]


def test_an_ingest_without_complete_settles_the_upload(app: Any, client: TestClient, alice: Any, sdk: Any) -> None:
    platform = sdk(alice)
    created = platform.datasets.create(dataset="bucketed", name="bucketed")
    data = b"PK\x05\x06" + b"\x00" * 18
    slot = _slot(client, alice, assetId=created["id"], totalBytes=len(data))
    assert httpx.put(slot["uploadUrl"], content=data).status_code == 200
    queued = client.post("/api/datasets/alice/bucketed/ingest", headers=alice.headers,
                         json={"sessionId": slot["sessionId"]})
    assert queued.status_code == 202, queued.text
    with app.state.lanner.db.session() as session:
        assert session.get(UploadSession, slot["sessionId"]).status == "ingested"


def test_links_are_presigned_and_lanners_own_route_still_checks_its_signature(app: Any, client: TestClient,
                                                                              moto_endpoint: str) -> None:
    ctx = app.state.lanner
    blob = ctx.blobs.put_bytes(b"\xff\xd8 image in a bucket")
    with ctx.db.session() as session:
        session.add(ImageBlob(sha256=blob.sha256, size=blob.size, width=1, height=1, format="jpeg", phash=0))
    direct = ctx.signer.download_url(blob.sha256, "a.jpg")
    assert direct.startswith(moto_endpoint) and httpx.get(direct).content == b"\xff\xd8 image in a bucket"
    page = ctx.signer.blob_links()
    assert page(blob.sha256, "a.jpg").startswith(moto_endpoint)
    policy = client.get("/login").headers["content-security-policy"]  # pages may show the bucket's images
    assert f"img-src 'self' {moto_endpoint};" in policy and "default-src 'self'" in policy

    own = urlsplit(ctx.signer.sign("GET", blob_path(blob.sha256, "a.jpg")))  # a link handed out before the switch
    served = client.get(f"{own.path}?{own.query}")
    assert served.status_code == 200 and served.content == b"\xff\xd8 image in a bucket"
    assert client.get(own.path).status_code in (401, 403)
    forged = client.get(f"{own.path}?{own.query}".replace("signature=", "signature=0"))
    assert forged.status_code in (401, 403)


def test_the_collector_deletes_unreferenced_objects_from_the_bucket(app: Any, client: TestClient, alice: Any,
                                                                    settings: Settings) -> None:
    ctx = app.state.lanner
    data = b"PK\x05\x06" + b"\x00" * 18
    slot = _slot(client, alice, totalBytes=len(data))
    assert httpx.put(slot["uploadUrl"], content=data).status_code == 200
    assert _complete(client, alice, slot).status_code == 200
    assert app.state.upload_settler.run_once() == 1  # the completed upload refers to its file
    kept, loose = hashlib.sha256(data).hexdigest(), ctx.blobs.put_bytes(b"\xff\xd8 loose").sha256
    time.sleep(0.01)  # idle for longer than the grace of 0 s
    swept = sweep(ctx.db, ctx.blobs, settings, shards=sorted({kept[:2], loose[:2]}))
    assert swept.blobs == 1
    assert ctx.blobs.exists(kept) and not ctx.blobs.exists(loose)


def test_a_purge_deletes_what_it_let_go_of_from_the_bucket(app: Any) -> None:
    """``storage.references.delete_unreferenced``: what a purge or a deleted export runs after its commit."""
    ctx = app.state.lanner
    gone = ctx.blobs.put_bytes(b"\xff\xd8 purged").sha256
    time.sleep(0.01)  # idle for longer than the grace of 0 s
    assert delete_unreferenced(ctx.db, ctx.blobs, {gone: 0}, 0)["blobs"] == 1
    assert not ctx.blobs.exists(gone)
