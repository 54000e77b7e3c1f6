"""Content-addressed blob store. One small interface; the local folder is the embedded implementation."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Container, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from lanner.errors import Conflict, PayloadTooLarge

CHUNK = 1 << 20


@dataclass(frozen=True)
class StoredBlob:
    sha256: str
    size: int


class BlobStore(ABC):
    """Blobs are addressed by the SHA-256 of their bytes, so the same file is stored once."""

    @abstractmethod
    def put_file(self, source: BinaryIO) -> StoredBlob: ...

    @abstractmethod
    def put_bytes(self, data: bytes) -> StoredBlob: ...

    @abstractmethod
    async def put_stream(self, chunks: AsyncIterator[bytes], max_bytes: int | None = None) -> StoredBlob: ...

    @abstractmethod
    def put_path(self, path: Path, sha256: str, *, move: bool = False, link: bool = False) -> None:
        """Store a local file whose digest the caller already computed (saves hashing twice). ``link``: the file
        is the caller's private copy and never changes again (unpacked from an upload), so the store may share its
        bytes (a hard link) instead of copying them."""

    @abstractmethod
    def exists(self, sha256: str) -> bool: ...

    @abstractmethod
    def touch(self, sha256: str) -> bool:
        """Refresh the blob's write time, as a deduplicated write would; False when it does not exist."""

    @abstractmethod
    def iter_idle(self, shard: str, idle_seconds: float) -> Iterator[str]:
        """Digests starting with the hex prefix ``shard`` that nobody wrote for ``idle_seconds`` (the sweep of
        ``maintenance.gc`` walks the store a shard at a time)."""

    @abstractmethod
    def collect_partial(self, idle_seconds: float, keep: Container[str] = frozenset()) -> int:
        """Delete half-written uploads (a PUT cut off by a crash) idle for ``idle_seconds``; returns how many.
        ``keep``: upload slots whose staged file a live upload session still needs (a bucket's presigned PUTs)."""

    @abstractmethod
    def open(self, sha256: str) -> BinaryIO: ...

    @abstractmethod
    def local_path(self, sha256: str) -> Path | None:
        """A filesystem path when the store has one. Only the blob route uses it (sendfile); everyone else
        reads through ``open``/``iter_bytes`` or ``copy_to``, so a store without paths works everywhere."""

    @abstractmethod
    def copy_to(self, sha256: str, dest: Path) -> None:
        """Make ``dest`` a private copy of the blob (a hard link where the store can, which costs nothing)."""

    @abstractmethod
    def delete_if_idle(self, sha256: str, idle_seconds: float) -> bool:
        """Delete a blob nobody wrote for ``idle_seconds``. Every write, a deduplicated one too, refreshes the
        blob's write time, so a collector never removes bytes a writer is about to reference."""

    def iter_bytes(self, sha256: str) -> Iterator[bytes]:
        with self.open(sha256) as fh:
            while chunk := fh.read(CHUNK):
                yield chunk

    # Direct links. A store whose bytes a client can fetch or send without Lanner (a bucket) answers with its
    # own presigned URLs (``presigns``); None means Lanner serves the bytes itself, behind its own signed links.
    presigns = False

    def presigned_get(self, sha256: str, filename: str, ttl_seconds: int) -> str | None:
        """A URL that GETs the blob straight from the store for ``ttl_seconds``, or None."""
        return None

    def link_origin(self) -> str | None:
        """Scheme, host and port of ``presigned_get``'s URLs (web pages allow images from there), or None."""
        return None

    def presigned_put(self, slot: str, expires_at: float) -> str | None:
        """A URL where a client PUTs the file of the upload slot ``slot`` until ``expires_at``, or None. What
        arrives there is staged, never trusted: ``settle_staged`` hashes it before it becomes a blob."""
        return None

    def stat_staged(self, slot: str) -> int | None:
        """The size of what a client PUT on ``slot``'s presigned URL, without reading it; None when nothing
        arrived there (or the store hands out no presigned uploads)."""
        return None

    def settle_staged(self, slot: str, max_bytes: int, *, size: int | None = None,
                      into: Path | None = None) -> StoredBlob | None:
        """Store by digest what a client PUT on ``slot``'s presigned URL, checking its size (at most
        ``max_bytes``; ``size`` when given, else ``StagedChanged``) and hashing every byte, also into the file
        ``into`` when given; the staged file stays until ``drop_staged``. None when nothing arrived there (or the
        store hands out no presigned uploads)."""
        return None

    def drop_staged(self, slot: str) -> None:
        """Delete what a client PUT on ``slot``'s presigned URL (settled, or refused)."""
        return None


def check_digest(sha256: str) -> None:
    """A digest names a file in the store: anything but 64 lowercase hex digits is refused before it is used."""
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise ValueError("not a sha256 digest")


class BlobTooLarge(PayloadTooLarge):
    """More bytes than the upload slot allows; the partial file is gone."""


class StagedChanged(Conflict):
    """A staged upload is not the size it had when its upload was completed (the client PUT it again)."""


class LocalBlobStore(BlobStore):
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "tmp").mkdir(parents=True, exist_ok=True)

    def _path(self, sha256: str) -> Path:
        check_digest(sha256)
        return self.root / sha256[:2] / sha256[2:4] / sha256

    def _commit(self, tmp_path: Path, digest: str) -> None:
        final = self._path(digest)
        if _touch(final):
            tmp_path.unlink(missing_ok=True)
            return
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp_path, final)

    def put_file(self, source: BinaryIO) -> StoredBlob:
        with _Incoming(self) as incoming:
            while chunk := source.read(CHUNK):
                incoming.write(chunk)
        assert incoming.stored is not None
        return incoming.stored

    async def put_stream(self, chunks: AsyncIterator[bytes], max_bytes: int | None = None) -> StoredBlob:
        with _Incoming(self) as incoming:
            async for chunk in chunks:
                if max_bytes is not None and incoming.size + len(chunk) > max_bytes:
                    raise BlobTooLarge(f"upload exceeds {max_bytes} bytes")
                incoming.write(chunk)
        assert incoming.stored is not None
        return incoming.stored

    def put_path(self, path: Path, sha256: str, *, move: bool = False, link: bool = False) -> None:
        final = self._path(sha256)
        if _touch(final) or (link and _link(path, final)):
            return
        fd, name = tempfile.mkstemp(dir=self.root / "tmp")
        os.close(fd)
        try:
            if move:
                os.replace(path, name)
            else:
                shutil.copyfile(path, name)
            _place(name, final)
        finally:
            Path(name).unlink(missing_ok=True)

    def put_bytes(self, data: bytes) -> StoredBlob:
        digest = hashlib.sha256(data).hexdigest()
        final = self._path(digest)
        if not _touch(final):
            fd, name = tempfile.mkstemp(dir=self.root / "tmp")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            _place(name, final)
        return StoredBlob(digest, len(data))

    def exists(self, sha256: str) -> bool:
        return self._path(sha256).exists()

    def open(self, sha256: str) -> BinaryIO:
        return self._path(sha256).open("rb")

    def touch(self, sha256: str) -> bool:
        return _touch(self._path(sha256))

    def iter_idle(self, shard: str, idle_seconds: float) -> Iterator[str]:
        if len(shard) != 2 or any(c not in "0123456789abcdef" for c in shard):
            raise ValueError("a shard is two hex digits")
        cutoff = time.time() - idle_seconds
        for sub in sorted((self.root / shard).glob("??")):
            for path in sub.iterdir():
                try:
                    if len(path.name) == 64 and path.stat().st_mtime <= cutoff:
                        yield path.name
                except FileNotFoundError:
                    continue

    def collect_partial(self, idle_seconds: float, keep: Container[str] = frozenset()) -> int:
        return remove_idle_files(self.root / "tmp", time.time() - idle_seconds)  # no slots: PUTs come through Lanner

    def local_path(self, sha256: str) -> Path | None:
        path = self._path(sha256)
        return path if path.exists() else None

    def copy_to(self, sha256: str, dest: Path) -> None:
        source = self._path(sha256)
        try:
            os.link(source, dest)
        except OSError:  # another filesystem, or links not allowed
            shutil.copyfile(source, dest)

    def delete_if_idle(self, sha256: str, idle_seconds: float) -> bool:
        path = self._path(sha256)
        try:
            if time.time() - path.stat().st_mtime < idle_seconds:
                return False
            path.unlink()
        except FileNotFoundError:
            return False
        return True


def file_digest(path: Path) -> str:
    """The sha256 of a file, read in chunks: the name a blob of its bytes has in any store."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def remove_idle_files(folder: Path, cutoff: float) -> int:
    """Delete the files in ``folder`` nobody wrote since ``cutoff`` (a Unix time): half-written blobs and spools
    of a writer that died. Answers how many went; one a concurrent sweep took first is not counted."""
    removed = 0
    for path in folder.iterdir():
        try:
            if path.stat().st_mtime <= cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def _place(name: str, final: Path) -> None:
    """Move a finished temporary file to its blob's place, making the shard folders the first time (trying first
    saves two stat calls per blob once they exist)."""
    try:
        os.replace(name, final)
    except FileNotFoundError:
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(name, final)


def _link(source: Path, final: Path) -> bool:
    """Make ``final`` a hard link to ``source`` (atomic: the name appears with all its bytes) with a fresh write
    time, as a copy would have; False where links are impossible (another filesystem), so the caller copies."""
    for attempt in range(2):
        try:
            os.link(source, final)
        except FileExistsError:  # stored meanwhile, by another worker
            return _touch(final)
        except FileNotFoundError:
            if attempt:
                return False  # the source is missing: the copy says so
            final.parent.mkdir(parents=True, exist_ok=True)
            continue
        except OSError:
            return False
        os.utime(final)
        return True
    return False


def _touch(path: Path) -> bool:
    """Refresh an existing blob's write time (a deduplicated write); False when it does not exist."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    return True


class _Incoming:
    """A blob being written: bytes go to a temporary file while hashed; on success it moves to its digest's
    place, on any failure the temporary file is removed."""

    def __init__(self, store: LocalBlobStore) -> None:
        self._store = store
        self._hasher = hashlib.sha256()
        self.size = 0
        fd, name = tempfile.mkstemp(dir=store.root / "tmp")
        self._path = Path(name)
        self._file = os.fdopen(fd, "wb")
        self.stored: StoredBlob | None = None

    def write(self, chunk: bytes) -> None:
        self._hasher.update(chunk)
        self._file.write(chunk)
        self.size += len(chunk)

    def __enter__(self) -> _Incoming:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._file.close()
        if exc_type is not None:
            self._path.unlink(missing_ok=True)
            return
        digest = self._hasher.hexdigest()
        self._store._commit(self._path, digest)
        self.stored = StoredBlob(digest, self.size)
