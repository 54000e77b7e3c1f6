"""``lanner storage migrate``: a local store into a bucket (moto's server) and back, every blob hashed on the way,
a rerun skipping what is already there, a corrupt source file reported and never copied."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from lanner.storage.blobs import LocalBlobStore
from lanner.storage.migrate import migrate
from lanner.storage.s3 import S3BlobStore
from tests.servers import VENV_BIN, lanner_env
from tests.storage.moto import CREDENTIALS, s3_env

BLOBS = [f"blob {i}".encode() * (i + 1) for i in range(12)]


def _bucket_store(endpoint: str, bucket: str, scratch: Path) -> S3BlobStore:
    return S3BlobStore(bucket=bucket, prefix="lanner/", endpoint=endpoint, path_style=True, allow_http=True,
                       scratch=scratch, **CREDENTIALS)


def _contents(store: LocalBlobStore | S3BlobStore) -> dict[str, bytes]:
    shards = {hashlib.sha256(data).hexdigest()[:2] for data in BLOBS} | {"ee"}
    return {digest: b"".join(store.iter_bytes(digest)) for shard in sorted(shards)
            for digest in store.iter_idle(shard, 0)}


def test_a_store_moves_into_a_bucket_and_back(tmp_path: Path, moto_endpoint: str, bucket: str) -> None:
    local = LocalBlobStore(tmp_path / "blobs")
    digests = {local.put_bytes(data).sha256 for data in BLOBS}
    corrupt = "ee" + "0" * 62
    (tmp_path / "blobs" / "ee" / "00").mkdir(parents=True)
    (tmp_path / "blobs" / "ee" / "00" / corrupt).write_bytes(b"not what the name says")
    bucket_store = _bucket_store(moto_endpoint, bucket, tmp_path / "spool")

    first = migrate(local, bucket_store, tmp_path / "scratch")
    assert (first.copied, first.skipped, first.corrupt) == (12, 0, [corrupt])
    assert first.bytes == sum(len(data) for data in BLOBS)
    assert _contents(bucket_store) == {hashlib.sha256(data).hexdigest(): data for data in BLOBS}
    again = migrate(local, bucket_store, tmp_path / "scratch")  # resumable: nothing left to copy
    assert (again.copied, again.skipped) == (0, 12)

    back = LocalBlobStore(tmp_path / "back")
    returned = migrate(bucket_store, back, tmp_path / "scratch")
    assert (returned.copied, returned.skipped, returned.corrupt) == (12, 0, [])
    assert set(_contents(back)) == digests
    assert all(hashlib.sha256(data).hexdigest() == digest for digest, data in _contents(back).items())


def test_the_command_reports_its_counts(tmp_path: Path, moto_endpoint: str, bucket: str) -> None:
    home = tmp_path / "home"
    local = LocalBlobStore(home / "blobs")
    for data in BLOBS[:3]:
        local.put_bytes(data)
    env = lanner_env(home, **s3_env(moto_endpoint, bucket))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(VENV_BIN / "lanner"), "storage", "migrate", *args], capture_output=True,
                              text=True, env=env, check=False, timeout=120)

    moved = run("--to", "s3")
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.startswith("copied 3 blobs") and "skipped 0" in moved.stdout
    assert "copied 0 blobs" in run("--to", "s3").stdout
    assert "skipped 3 already in local" in run("--to", "local").stdout
    wrong = run("--to", "azure")
    assert wrong.returncode == 1 and "--to is 's3' or 'local'" in wrong.stderr
