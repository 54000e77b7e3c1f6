"""Blobs in an S3-compatible bucket (AWS S3, MinIO, R2, GCS's S3 interface), so API hosts need no shared disk.

Why obstore: one maintained Rust client (the ``object_store`` crate) for S3, GCS and Azure behind one small API,
sync and async, with multipart uploads and presigned URLs (``obstore.sign``), and without the boto stack
(botocore's 80 MB of service models, SigV2 presigning by default, no async). Measured against moto here:
put, get, list, delete, multipart and signed URLs used from httpx.

Layout, content-addressed as the local store: ``<prefix>blobs/ab/cd/<sha256>``. Bytes the client PUTs by a
presigned URL land under ``<prefix>staging/<slot key>`` first: the store cannot trust what a client wrote, so
``settle_staged`` reads the object back, hashes it and only then copies it to its digest's key (from a private
snapshot: the presigned URL stays valid, and bytes PUT again meanwhile must not land under another file's
digest). ``stat_staged`` is what completing an upload costs: one HEAD for the size. S3 has no way
to refresh an object's time in place, so a deduplicated write rewrites the object (once a minute at most): its
last-modified time is then the write time that the collector's idle check reads, as the local store's mtime.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Container, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import NotFoundError
from obstore.store import S3Store

from lanner.storage.blobs import (
    CHUNK,
    BlobStore,
    BlobTooLarge,
    StagedChanged,
    StoredBlob,
    check_digest,
    remove_idle_files,
)

# A write that finds its blob written this recently does not rewrite it: the collector's grace period
# (LANNER_BLOB_GRACE_SECONDS, an hour by default) is far longer, and rewriting costs the whole object.
REFRESH_AFTER_SECONDS = 60.0
MISSING = (NotFoundError, FileNotFoundError)  # obstore raises either for a 404, depending on the call
MAX_PRESIGN_SECONDS = 7 * 24 * 3600  # SigV4's limit: a longer-lived URL is refused by S3
MULTIPART_ABOVE = 64 * 1024 * 1024  # larger objects are sent in parts (5 MiB each at least, S3's floor)


class S3BlobStore(BlobStore):
    presigns = True

    def __init__(self, *, bucket: str, prefix: str = "", endpoint: str | None = None, region: str | None = None,
                 access_key_id: str | None = None, secret_access_key: str | None = None, path_style: bool = False,
                 allow_http: bool = False, scratch: Path) -> None:
        self._args = {"bucket": bucket, "prefix": prefix, "endpoint": endpoint, "region": region,
                      "access_key_id": access_key_id, "secret_access_key": secret_access_key,
                      "path_style": path_style, "allow_http": allow_http, "scratch": scratch}
        options: dict[str, Any] = {"virtual_hosted_style_request": not path_style,
                                   "client_options": {"allow_http": allow_http}}
        for name, value in (("endpoint", endpoint), ("region", region), ("access_key_id", access_key_id),
                            ("secret_access_key", secret_access_key)):
            if value:
                options[name] = value
        self.store = S3Store(bucket, **options)
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.scratch = scratch  # local spool for streams and reads that need a file; on the API host only
        scratch.mkdir(parents=True, exist_ok=True)

    def __reduce__(self) -> tuple[Any, ...]:
        """Import probe processes receive the store pickled: they rebuild the client from its settings."""
        return (_rebuild, (self._args,))

    def __repr__(self) -> str:
        return f"S3BlobStore({self.store!r}, prefix={self.prefix!r})"

    def key(self, sha256: str) -> str:
        check_digest(sha256)
        return f"{self.prefix}blobs/{sha256[:2]}/{sha256[2:4]}/{sha256}"

    def staging_key(self, slot: str) -> str:
        return f"{self.prefix}staging/{slot}"

    def _modified(self, key: str) -> float | None:
        try:
            return obstore.head(self.store, key)["last_modified"].timestamp()
        except MISSING:
            return None

    def _put(self, key: str, source: Path | bytes) -> None:
        size = len(source) if isinstance(source, bytes) else source.stat().st_size
        obstore.put(self.store, key, source, use_multipart=size > MULTIPART_ABOVE, chunk_size=8 * 1024 * 1024,
                    max_concurrency=4)

    def _store(self, digest: str, source: Path | bytes) -> None:
        """Write ``source`` at its digest's key unless it is there and fresh (a deduplicated write)."""
        modified = self._modified(self.key(digest))
        if modified is None or time.time() - modified >= REFRESH_AFTER_SECONDS:
            self._put(self.key(digest), source)

    def _spool(self) -> tuple[BinaryIO, Path]:
        fd, name = tempfile.mkstemp(dir=self.scratch)
        return os.fdopen(fd, "w+b"), Path(name)

    def put_file(self, source: BinaryIO) -> StoredBlob:
        spool, path = self._spool()
        try:
            hasher, size = hashlib.sha256(), 0
            with spool:
                while chunk := source.read(CHUNK):
                    hasher.update(chunk)
                    spool.write(chunk)
                    size += len(chunk)
            self._store(hasher.hexdigest(), path)
            return StoredBlob(hasher.hexdigest(), size)
        finally:
            path.unlink(missing_ok=True)

    def put_bytes(self, data: bytes) -> StoredBlob:
        digest = hashlib.sha256(data).hexdigest()
        self._store(digest, data)
        return StoredBlob(digest, len(data))

    async def put_stream(self, chunks: AsyncIterator[bytes], max_bytes: int | None = None) -> StoredBlob:
        """Spooled to a local file while hashed (the key is the digest, known only at the end), then sent."""
        spool, path = self._spool()
        try:
            hasher, size = hashlib.sha256(), 0
            with spool:
                async for chunk in chunks:
                    if max_bytes is not None and size + len(chunk) > max_bytes:
                        raise BlobTooLarge(f"upload exceeds {max_bytes} bytes")
                    hasher.update(chunk)
                    spool.write(chunk)
                    size += len(chunk)
            digest = hasher.hexdigest()
            await asyncio.to_thread(self._store, digest, path)  # the blocking upload leaves the loop to others
            return StoredBlob(digest, size)
        finally:
            path.unlink(missing_ok=True)

    def put_path(self, path: Path, sha256: str, *, move: bool = False, link: bool = False) -> None:
        self._store(sha256, path)
        if move:
            path.unlink(missing_ok=True)

    def exists(self, sha256: str) -> bool:
        return self._modified(self.key(sha256)) is not None

    def touch(self, sha256: str) -> bool:
        key = self.key(sha256)
        modified = self._modified(key)
        if modified is None:
            return False
        if time.time() - modified >= REFRESH_AFTER_SECONDS:
            obstore.put(self.store, key, obstore.get(self.store, key).bytes())
        return True

    def _listing(self, prefix: str) -> Iterator[dict[str, Any]]:
        for batch in obstore.list(self.store, prefix, chunk_size=1000):
            yield from batch

    def iter_idle(self, shard: str, idle_seconds: float) -> Iterator[str]:
        if len(shard) != 2 or any(c not in "0123456789abcdef" for c in shard):
            raise ValueError("a shard is two hex digits")
        cutoff = time.time() - idle_seconds
        for meta in self._listing(f"{self.prefix}blobs/{shard}/"):
            name = meta["path"].rsplit("/", 1)[-1]
            if len(name) == 64 and meta["last_modified"].timestamp() <= cutoff:
                yield name

    def collect_partial(self, idle_seconds: float, keep: Container[str] = frozenset()) -> int:
        """Staged uploads nobody settled (a client PUT and never completed; a second PUT on a used URL), snapshots
        of a settle that died and local spool files of a crashed process; never the slots in ``keep`` (live upload
        sessions' files, however long they wait). Incomplete multipart uploads are the bucket's lifecycle rule's to
        abort (docs/deploy.md), as S3 lists them apart from objects."""
        cutoff = time.time() - idle_seconds
        staging = f"{self.prefix}staging/"
        stale = [meta["path"] for meta in self._listing(staging)
                 if meta["last_modified"].timestamp() <= cutoff and meta["path"][len(staging):] not in keep]
        if stale:
            obstore.delete(self.store, stale)
        return len(stale) + remove_idle_files(self.scratch, cutoff)

    def open(self, sha256: str) -> BinaryIO:
        """A private local copy, opened (deleted on close): callers read with seek and ``zipfile`` alike."""
        spool = tempfile.TemporaryFile(dir=self.scratch)
        try:
            for chunk in obstore.get(self.store, self.key(sha256)).stream(CHUNK):
                spool.write(chunk)
        except MISSING:
            spool.close()
            raise FileNotFoundError(sha256) from None
        spool.seek(0)
        return spool  # type: ignore[return-value]

    def iter_bytes(self, sha256: str) -> Iterator[bytes]:
        try:
            result = obstore.get(self.store, self.key(sha256))
        except MISSING:
            raise FileNotFoundError(sha256) from None
        for chunk in result.stream(CHUNK):
            yield bytes(chunk)

    def local_path(self, sha256: str) -> Path | None:
        check_digest(sha256)
        return None

    def copy_to(self, sha256: str, dest: Path) -> None:
        try:
            result = obstore.get(self.store, self.key(sha256))
        except MISSING:
            raise FileNotFoundError(sha256) from None
        with dest.open("wb") as out:
            for chunk in result.stream(CHUNK):
                out.write(chunk)

    def delete_if_idle(self, sha256: str, idle_seconds: float) -> bool:
        """Checked then deleted (S3 has no conditional delete on time): a writer refreshing the blob in between
        loses it, as it would in the instant after the local store's check; its rows still hold the digest, so
        the next write of those bytes stores them again."""
        key = self.key(sha256)
        modified = self._modified(key)
        if modified is None or time.time() - modified < idle_seconds:
            return False
        obstore.delete(self.store, key)
        return True

    def presigned_get(self, sha256: str, filename: str, ttl_seconds: int) -> str | None:
        """The name is not in the URL (one object serves every name it has): callers that need it pass it beside
        the URL, as the trainer's NDJSON does."""
        ttl = min(max(1, ttl_seconds), MAX_PRESIGN_SECONDS)
        return obstore.sign(self.store, "GET", self.key(sha256), timedelta(seconds=ttl))

    def link_origin(self) -> str | None:
        """Read from a signed URL (no request is made): the endpoint's, or the bucket's virtual host on AWS."""
        parts = urlsplit(self.presigned_get("0" * 64, "", 60) or "")
        return f"{parts.scheme}://{parts.netloc}"

    def presigned_put(self, slot: str, expires_at: float) -> str | None:
        ttl = min(max(1, int(expires_at - time.time())), MAX_PRESIGN_SECONDS)
        return obstore.sign(self.store, "PUT", self.staging_key(slot), timedelta(seconds=ttl))

    def stat_staged(self, slot: str) -> int | None:
        """The size of what a client PUT on ``slot`` (one HEAD, no byte read), None when nothing is there."""
        try:
            return int(obstore.head(self.store, self.staging_key(slot))["size"])
        except MISSING:
            return None

    def drop_staged(self, slot: str) -> None:
        """Delete what was PUT on ``slot`` (nothing there is fine): once settled, or refused."""
        obstore.delete(self.store, self.staging_key(slot))

    def settle_staged(self, slot: str, max_bytes: int, *, size: int | None = None,
                      into: Path | None = None) -> StoredBlob | None:
        """Hash what a client PUT on ``slot`` and store it by digest; the staged object stays (the caller drops it
        once the digest is recorded, so a settle killed at any point can run again). The staged object is first
        copied server-side to a snapshot key no client can write: a PUT on the still valid URL meanwhile changes
        nothing of what is hashed and then filed. The snapshot's size is checked before a byte is read (over
        ``max_bytes``: the staged object goes, ``BlobTooLarge``; not ``size``, the size completion saw:
        ``StagedChanged``). ``into``: the bytes are also written to that file as they are hashed (an import reads
        the upload anyway). None when nothing is on the slot."""
        snapshot = f"{self.prefix}staging/settling/{uuid.uuid4().hex}"
        try:
            obstore.copy(self.store, self.staging_key(slot), snapshot)
        except MISSING:
            return None
        try:
            result = obstore.get(self.store, snapshot)
            found = int(result.meta["size"])
            if found > max_bytes:
                obstore.delete(self.store, self.staging_key(slot))
                raise BlobTooLarge(f"the upload has {found} bytes; this upload takes at most {max_bytes}")
            if size is not None and found != size:
                raise StagedChanged(f"the uploaded file changed after the upload was completed ({size} bytes "
                                    f"then, {found} now)")
            hasher, read = hashlib.sha256(), 0
            out = into.open("wb") if into is not None else None
            try:
                for chunk in result.stream(CHUNK):
                    hasher.update(chunk)
                    read += len(chunk)
                    if out is not None:
                        out.write(chunk)
            finally:
                if out is not None:
                    out.close()
            digest = hasher.hexdigest()
            obstore.copy(self.store, snapshot, self.key(digest))  # also refreshes a blob already there
        finally:
            obstore.delete(self.store, snapshot)
        return StoredBlob(digest, read)


def _rebuild(args: dict[str, Any]) -> S3BlobStore:
    return S3BlobStore(**args)
