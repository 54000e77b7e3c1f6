"""Which blob store a process uses: the one place that reads LANNER_BLOB_STORE, so the API, the workers it starts
and ``lanner storage migrate`` all open the same store."""

from __future__ import annotations

from lanner.config import Settings
from lanner.storage.blobs import BlobStore, LocalBlobStore
from lanner.storage.s3 import S3BlobStore


def open_blob_store(settings: Settings, kind: str | None = None) -> BlobStore:
    """The store ``settings`` configure (``kind`` overrides LANNER_BLOB_STORE: migrate opens both)."""
    kind = kind or settings.blob_store
    if kind == "local":
        return LocalBlobStore(settings.blob_root)
    if kind != "s3":
        raise ValueError(f"unknown blob store {kind!r}: 'local' or 's3'")
    if not settings.s3_bucket:
        raise ValueError("LANNER_BLOB_STORE=s3 needs LANNER_S3_BUCKET")
    return S3BlobStore(bucket=settings.s3_bucket, prefix=settings.s3_prefix, endpoint=settings.s3_endpoint,
                       region=settings.s3_region, access_key_id=settings.s3_access_key_id,
                       secret_access_key=settings.s3_secret_access_key, path_style=settings.s3_path_style,
                       allow_http=settings.s3_allow_http, scratch=settings.resolved_home / "s3-spool")
