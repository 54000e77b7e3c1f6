"""The one blob API (``storage.blobs.BlobStore``) behaves the same on a local folder and in an S3 bucket (moto's
server): content addressing, deduplication, reads, the collector's idle checks and deletes."""

from __future__ import annotations

import asyncio
import hashlib
import io
import pickle
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lanner.storage import s3
from lanner.storage.blobs import BlobStore, BlobTooLarge, LocalBlobStore, StagedChanged
from lanner.storage.s3 import S3BlobStore
from tests.servers import wait_for
from tests.storage.moto import CREDENTIALS


def s3_store(endpoint: str, bucket: str, scratch: Path, prefix: str = "lanner/") -> S3BlobStore:
    return S3BlobStore(bucket=bucket, prefix=prefix, endpoint=endpoint, region="us-east-1", path_style=True,
                       allow_http=True, scratch=scratch, **CREDENTIALS)


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    if request.param == "local":
        return LocalBlobStore(tmp_path / "blobs")
    return s3_store(request.getfixturevalue("moto_endpoint"), request.getfixturevalue("bucket"), tmp_path / "spool")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def test_every_way_in_stores_the_bytes_under_their_digest(store: BlobStore, tmp_path: Path) -> None:
    assert store.put_bytes(b"one").sha256 == sha(b"one")
    assert store.put_file(io.BytesIO(b"two" * 100_000)).sha256 == sha(b"two" * 100_000)
    streamed = asyncio.run(store.put_stream(chunks(b"th", b"ree")))
    assert (streamed.sha256, streamed.size) == (sha(b"three"), 5)
    source = tmp_path / "four.bin"
    source.write_bytes(b"four")
    store.put_path(source, sha(b"four"), move=True)
    assert not source.exists()
    for data in (b"one", b"two" * 100_000, b"three", b"four"):
        digest = sha(data)
        assert store.exists(digest)
        with store.open(digest) as handle:
            assert handle.read() == data
        assert b"".join(store.iter_bytes(digest)) == data
        copy = tmp_path / f"copy-{digest}"
        store.copy_to(digest, copy)
        assert copy.read_bytes() == data
    assert store.put_bytes(b"one").size == 3  # stored again: the same blob
    assert not store.exists(sha(b"never stored"))
    with pytest.raises(ValueError):
        store.exists("../../etc/passwd")


def test_a_stream_over_its_limit_stores_nothing(store: BlobStore) -> None:
    with pytest.raises(BlobTooLarge):
        asyncio.run(store.put_stream(chunks(b"x" * 10, b"y" * 10), max_bytes=15))
    assert not store.exists(sha(b"x" * 10 + b"y" * 10))
    assert store.collect_partial(0) == 0  # the spool went with the failure


def test_the_collector_sees_idle_blobs_and_deletes_only_those(store: BlobStore) -> None:
    blob = store.put_bytes(b"idle bytes")
    shard = blob.sha256[:2]
    assert blob.sha256 in list(store.iter_idle(shard, 0))
    assert blob.sha256 not in list(store.iter_idle(shard, 3600))  # written just now
    assert store.touch(blob.sha256) and not store.touch(sha(b"absent"))
    assert not store.delete_if_idle(blob.sha256, 3600)
    assert store.exists(blob.sha256)
    time.sleep(0.01)  # the last-modified time must be strictly in the past of "now - 0"
    assert store.delete_if_idle(blob.sha256, 0)
    assert not store.exists(blob.sha256) and not store.delete_if_idle(blob.sha256, 0)
    with pytest.raises(FileNotFoundError):
        store.copy_to(blob.sha256, Path("/nonexistent-dir/never-written"))
    with pytest.raises(ValueError):
        list(store.iter_idle("zz", 0))


def test_only_a_bucket_hands_out_direct_links(store: BlobStore) -> None:
    blob = store.put_bytes(b"linked")
    url = store.presigned_get(blob.sha256, "a.bin", 60)
    if isinstance(store, LocalBlobStore):
        assert url is None and store.presigned_put("sessions/x/a.zip", time.time() + 60) is None
        assert store.settle_staged("sessions/x/a.zip", 100) is None and not store.presigns
        return
    assert store.presigns and "X-Amz-Signature=" in url
    assert httpx.get(url).content == b"linked"


def test_a_presigned_upload_is_hashed_before_it_becomes_a_blob(moto_endpoint: str, bucket: str,
                                                              scratch: Path, tmp_path: Path) -> None:
    store = s3_store(moto_endpoint, bucket, scratch)
    slot = "sessions/abc/my data.zip"
    assert store.settle_staged(slot, 10**6) is None and store.stat_staged(slot) is None  # nothing PUT yet
    url = store.presigned_put(slot, time.time() + 600)
    assert url and url.startswith(f"{moto_endpoint}/{bucket}/lanner/staging/")
    assert httpx.put(url, content=b"archive bytes").status_code == 200
    assert store.stat_staged(slot) == 13  # the size, by a HEAD
    settled = store.settle_staged(slot, 10**6, size=13, into=tmp_path / "read.zip")
    assert settled is not None and (settled.sha256, settled.size) == (sha(b"archive bytes"), 13)
    assert b"".join(store.iter_bytes(settled.sha256)) == b"archive bytes"
    assert (tmp_path / "read.zip").read_bytes() == b"archive bytes"  # hashed as it was written there
    assert store.settle_staged(slot, 10**6) == settled  # the staged object stays until it is dropped: idempotent
    store.drop_staged(slot)
    assert store.settle_staged(slot, 10**6) is None and store.stat_staged(slot) is None
    store.drop_staged(slot)  # dropping twice is fine

    assert httpx.put(url, content=b"x" * 14).status_code == 200  # PUT again on the valid URL: not what completed
    with pytest.raises(StagedChanged):
        store.settle_staged(slot, 10**6, size=13)
    assert not store.exists(sha(b"x" * 14))

    assert httpx.put(url, content=b"z" * 101).status_code == 200
    with pytest.raises(BlobTooLarge):
        store.settle_staged(slot, 100)
    assert store.settle_staged(slot, 10**6) is None and not store.exists(sha(b"z" * 101))

    assert httpx.put(url, content=b"never completed").status_code == 200
    assert store.collect_partial(3600) == 0
    time.sleep(0.01)
    assert store.collect_partial(0, keep={slot}) == 0  # a live session's file stays, however idle
    assert store.collect_partial(0) == 1 and store.settle_staged(slot, 10**6) is None
    assert not list(store._listing(f"{store.prefix}staging/"))  # no settle left a snapshot behind


def test_a_put_during_a_settle_never_lands_under_the_hashed_digest(
        moto_endpoint: str, bucket: str, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The presigned URL stays valid after completion: bytes PUT again while a settle hashes must not be filed
    under the digest of the bytes it hashed (the settle hashes and files a snapshot no client can write)."""
    store = s3_store(moto_endpoint, bucket, scratch)
    slot = "sessions/race/a.zip"
    url = store.presigned_put(slot, time.time() + 600)
    assert url and httpx.put(url, content=b"honest bytes").status_code == 200
    real_get = s3.obstore.get

    def get_then_overwrite(*args: Any, **kwargs: Any) -> Any:
        result = real_get(*args, **kwargs)
        assert httpx.put(url, content=b"forged bytes").status_code == 200  # same size, while being hashed
        return result

    monkeypatch.setattr(s3.obstore, "get", get_then_overwrite)
    settled = store.settle_staged(slot, 10**6)
    monkeypatch.setattr(s3.obstore, "get", real_get)
    assert settled is not None and settled.sha256 == sha(b"honest bytes")
    assert b"".join(store.iter_bytes(settled.sha256)) == b"honest bytes"


def test_a_bucket_store_travels_to_probe_processes(moto_endpoint: str, bucket: str, scratch: Path) -> None:
    """Import probe processes receive the store pickled (``probe_pool.ProbePool``)."""
    store = s3_store(moto_endpoint, bucket, scratch, prefix="other")
    blob = store.put_bytes(b"pickled")
    copy = pickle.loads(pickle.dumps(store))
    assert copy.prefix == "other/" and b"".join(copy.iter_bytes(blob.sha256)) == b"pickled"


def test_large_blobs_go_in_parts_and_a_deduplicated_write_refreshes_the_object(
        moto_endpoint: str, bucket: str, scratch: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3, "MULTIPART_ABOVE", 6 * 2**20)  # S3's parts are 5 MiB at least: two parts of 8 MiB
    monkeypatch.setattr(s3, "REFRESH_AFTER_SECONDS", 0.0)
    store = s3_store(moto_endpoint, bucket, scratch)
    source = tmp_path / "large.bin"
    source.write_bytes(b"L" * (12 * 2**20))
    digest = sha(source.read_bytes())
    store.put_path(source, digest)
    assert store.exists(digest) and sum(len(c) for c in store.iter_bytes(digest)) == 12 * 2**20

    wait_for(lambda: digest in list(store.iter_idle(digest[:2], 1)), timeout=30, what="the blob to be 1 s idle")
    store.put_path(source, digest)  # the same bytes again: the object's time is the write's
    assert digest not in list(store.iter_idle(digest[:2], 1))
    wait_for(lambda: digest in list(store.iter_idle(digest[:2], 1)), timeout=30, what="the blob to be 1 s idle")
    assert store.touch(digest) and digest not in list(store.iter_idle(digest[:2], 1))
