"""Storage integrations, the bucket objects that dataset images stand for, and bucket imports.

How a bucket image is represented: as every image, by its content. The import reads each object once, so the
image gets its ``ImageBlob`` row (sha256, size, width, height, phash, a thumbnail stored by Lanner) and its
``DatasetItem`` rows like any upload; only the pixels stay in the bucket, and a ``BucketObject`` row says where
(integration, bucket, key) and pins them (ETag and size at import). Keeping the sha256 as the key means every
dataset feature (versions, clones, curation, labels, duplicates, health) works unchanged on bucket datasets;
serving the pixels looks the object up and compares its ETag first, so a changed or deleted object is reported
(``state`` changed | missing), never served in place of the image that was labelled.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, id_column, utcnow


class StorageIntegration(Base):
    """A connected bucket account. ``secret`` is the credentials, sealed (``crypto.seal``); nothing reads it
    except ``stores.open_store``, and no schema has a field for it."""

    __tablename__ = "storage_integrations"

    id: Mapped[str] = id_column()
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    provider: Mapped[str] = mapped_column(String(10))  # s3 | gcs | azure
    identity: Mapped[str] = mapped_column(String(300))  # access key id, service account e-mail, account name
    targets: Mapped[list[Any]] = mapped_column(JSON, default=list)  # buckets or containers
    endpoint: Mapped[str | None] = mapped_column(String(500))  # S3-compatible servers; None: the provider's own
    region: Mapped[str | None] = mapped_column(String(64))
    processing: Mapped[bool] = mapped_column(default=True)
    secret: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class BucketObject(Base):
    """Where an imported image's pixels live, pinned to the object's ETag at import. ``owner_id`` is the
    workspace of the dataset it was imported into (a team's too), not necessarily the integration's owner: a
    reader of the dataset gets the pixels through the integration of whoever imported them."""

    __tablename__ = "bucket_objects"
    __table_args__ = (UniqueConstraint("owner_id", "integration_id", "target", "key", "etag"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # Disconnecting keeps the rows: the datasets stay visible, their pixels unavailable until reconnected.
    integration_id: Mapped[str | None] = mapped_column(
        ForeignKey("storage_integrations.id", ondelete="SET NULL"), index=True)
    target: Mapped[str] = mapped_column(String(255))
    key: Mapped[str] = mapped_column(String(1024))
    etag: Mapped[str] = mapped_column(String(200))
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    state: Mapped[str] = mapped_column(String(10), default="ok")  # ok | changed | missing
    checked_at: Mapped[datetime] = mapped_column(default=utcnow)


class BucketImport(Base):
    """One import of a bucket prefix into a dataset, run by ``queue.BucketImports``; the row is its state:
    queued -> running -> succeeded | failed (``jobs``)."""

    __tablename__ = "bucket_imports"

    id: Mapped[str] = id_column()
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    integration_id: Mapped[str | None] = mapped_column(
        ForeignKey("storage_integrations.id", ondelete="SET NULL"))
    target: Mapped[str] = mapped_column(String(255))
    prefix: Mapped[str] = mapped_column(String(1024), default="")
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    stage: Mapped[str | None] = mapped_column(String(20))
    done: Mapped[int] = mapped_column(default=0)
    total: Mapped[int] = mapped_column(default=0)
    attempts: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
