"""``lanner storage migrate``: copy every blob of one store into another (a folder into a bucket, or back).

Content addressing makes it safe to run any number of times: a digest already in the target is skipped, so an
interrupted run resumes where it stopped, and every copied blob is hashed on the way (a corrupt source file is
reported, never copied under a digest it does not have). The source is left as it was: the operator switches
LANNER_BLOB_STORE once the counts say everything is there, then deletes the old copy."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lanner.storage.blobs import BlobStore, file_digest

SHARDS = tuple(f"{i:02x}" for i in range(256))


@dataclass
class Migrated:
    copied: int = 0
    skipped: int = 0
    bytes: int = 0
    corrupt: list[str] = field(default_factory=list)


def migrate(source: BlobStore, target: BlobStore, scratch: Path,
            progress: Callable[[Migrated], None] | None = None) -> Migrated:
    """Copy each blob of ``source`` that ``target`` lacks, through a scratch file hashed before it is stored."""
    result = Migrated()
    scratch.mkdir(parents=True, exist_ok=True)
    for shard in SHARDS:
        for digest in source.iter_idle(shard, 0.0):
            if target.exists(digest):
                result.skipped += 1
                continue
            with tempfile.TemporaryDirectory(dir=scratch) as folder:
                copy = Path(folder) / digest
                source.copy_to(digest, copy)
                if file_digest(copy) != digest:
                    result.corrupt.append(digest)
                    continue
                size = copy.stat().st_size
                target.put_path(copy, digest, move=True)
            result.copied += 1
            result.bytes += size
        if progress is not None:
            progress(result)
    return result

