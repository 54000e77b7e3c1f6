"""Datasets as copy-on-write manifests over content-addressed images.

An image's bytes and facts (``ImageBlob``) are stored once however many datasets hold it. A dataset points at
a ``Manifest``; the manifest's ``DatasetItem`` rows say which images it has, under which name and split, with
which labels. A clone or a version points at the same manifest (O(1)); whoever writes to a shared manifest
first gets a private copy (``service.writable_manifest``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, id_column, utcnow
from lanner.resources import OwnedResource


class ImageBlob(Base):
    __tablename__ = "image_blobs"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    width: Mapped[int]
    height: Mapped[int]
    format: Mapped[str] = mapped_column(String(10))
    phash: Mapped[int] = mapped_column(BigInteger)  # signed 64-bit view of the unsigned hash
    thumb_sha256: Mapped[str | None] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Manifest(Base):
    __tablename__ = "manifests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Dataset(OwnedResource, Base):
    """Owner, slug, name, description, visibility, tags, licence and metadata come from ``OwnedResource``.
    ``status`` changes only through ``datasets/state.py``."""

    __tablename__ = "datasets"
    __activity__ = "dataset"  # created, trashed, restored and deleted things of a team: lanner/teams/activity.py

    task: Mapped[str] = mapped_column(String(20), default="detect")
    class_names: Mapped[list[Any]] = mapped_column(default=list)
    kpt_shape: Mapped[list[Any] | None] = mapped_column()
    format: Mapped[str | None] = mapped_column(String(10))
    status: Mapped[str] = mapped_column(String(20), default="ready")
    processing_error: Mapped[dict[str, Any] | None] = mapped_column()
    last_ingest: Mapped[dict[str, Any] | None] = mapped_column()
    cloned_from_id: Mapped[str | None] = mapped_column(String(32))
    manifest_id: Mapped[int] = mapped_column(ForeignKey("manifests.id"), index=True)
    revision: Mapped[int] = mapped_column(default=0)  # bumped on every content change; keys caches
    health: Mapped[dict[str, Any] | None] = mapped_column()
    health_revision: Mapped[int | None]
    deleted_at: Mapped[datetime | None]


class DatasetItem(Base):
    """One image of a manifest: name, split, labels. ``key`` survives copy-on-write, so image ids stay stable."""

    __tablename__ = "dataset_items"
    __table_args__ = (
        UniqueConstraint("manifest_id", "key"),
        UniqueConstraint("manifest_id", "split", "name", name="uq_dataset_items_manifest_split_name"),
        Index("ix_dataset_items_manifest_name_key", "manifest_id", "name", "key"),  # ORDER BY name, key pages
        Index("ix_dataset_items_manifest_issues", "manifest_id", "issues"),  # errorCount without a table scan
        Index("ix_dataset_items_manifest_mask", "manifest_id", "class_mask"),  # class-filtered counts, index only
        # Labelled items (a label file, even empty, or a class) counted without reading each row's labels: the
        # dataset page's assistant section and the assistant's rounds ask on every visit and pass.
        Index("ix_dataset_items_manifest_labelled", "manifest_id",
              sqlite_where=text("labels IS NOT NULL OR class_id IS NOT NULL"),
              postgresql_where=text("labels IS NOT NULL OR class_id IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    manifest_id: Mapped[int] = mapped_column(ForeignKey("manifests.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(255))
    split: Mapped[str] = mapped_column(String(10))
    sha256: Mapped[str] = mapped_column(ForeignKey("image_blobs.sha256"), index=True)  # the collector asks
    # SQL NULL means "no label file" (unlabelled); [] means labelled with no objects. none_as_null keeps them apart.
    labels: Mapped[list[Any] | None] = mapped_column(JSON(none_as_null=True))
    class_id: Mapped[int | None]
    label_count: Mapped[int] = mapped_column(default=0)
    class_list: Mapped[str] = mapped_column(String(2000), default=",")  # ",0,3,": class filter with LIKE
    # Bit i set when class i (< 63) is present: the class filter is an integer AND instead of a string LIKE.
    class_mask: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    issues: Mapped[str] = mapped_column(String(500), default=",")       # ",duplicate,leakage,"
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Bumped on every label change by any path (SDK, class edits, the annotate API): a save names the revision
    # it started from, so two people editing one image get a conflict instead of overwriting each other.
    label_rev: Mapped[int] = mapped_column(default=0, server_default="0")
    labelled_by: Mapped[str | None] = mapped_column(String(300))  # user:<name>, model:<owner/project/model>, import
    labelled_at: Mapped[datetime | None]
    last_edit_id: Mapped[str | None] = mapped_column(String(64))  # a retried save with this id is not applied twice
    # The owner's own fields for the image (``images.update {metadata}``), e.g. {"location": "strasbourg"}.
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON(none_as_null=True))


class DatasetVersion(Base):
    """An immutable snapshot: a frozen manifest plus the class names and counts at that moment."""

    __tablename__ = "dataset_versions"
    __table_args__ = (UniqueConstraint("dataset_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    version: Mapped[int]
    description: Mapped[str] = mapped_column(Text, default="")
    manifest_id: Mapped[int] = mapped_column(ForeignKey("manifests.id"))
    class_names: Mapped[list[Any]] = mapped_column(default=list)
    task: Mapped[str] = mapped_column(String(20))
    stats: Mapped[dict[str, Any]] = mapped_column(default=dict)
    content_hash: Mapped[str] = mapped_column(String(64))
    source_revision: Mapped[int]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class DatasetExport(Base):
    """A built export (NDJSON, YOLO zip, COCO JSON) reused while the dataset's revision is unchanged."""

    __tablename__ = "dataset_exports"
    __table_args__ = (UniqueConstraint("dataset_id", "kind", "revision"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(10))
    revision: Mapped[int]
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None]


class ImportJob(Base):
    """One import of an uploaded file into a dataset, run by a worker process (``datasets.imports.queue``).

    The row is the job's durable state, so a server that dies mid-import finds it on start-up and runs it again
    or fails it with the reason (``datasets.imports.jobs``). ``source_sha256`` keeps the uploaded file alive while
    the job needs it and is cleared when the job ends, so the collector can then free it."""

    __tablename__ = "import_jobs"

    id: Mapped[str] = id_column()
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    upload_id: Mapped[str | None] = mapped_column(String(32))
    filename: Mapped[str] = mapped_column(String(255))
    source_sha256: Mapped[str | None] = mapped_column(String(64), index=True)
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    attempts: Mapped[int] = mapped_column(default=0)
    worker: Mapped[str | None] = mapped_column(String(200))  # host:server-pid:worker-pid of the running attempt
    heartbeat_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]


class ImageSelection(Base):
    """A set of a dataset's images one user picked outside the grid (the map's lasso), kept on the server so the
    grid can filter by it (``?sel=<id>``) with its own paging and bulk actions: a lasso may hold 100,000 images,
    too many for a URL. Only its maker sees it (anyone else gets a 404); ``datasets.selections`` keeps a few per
    user and dataset."""

    __tablename__ = "image_selections"

    id: Mapped[str] = id_column()
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    count: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ImageSelectionItem(Base):
    """One image of a selection, by its item key (stable across copy-on-write, as image ids are): the grid's
    filter is a semi-join on the primary key."""

    __tablename__ = "image_selection_items"

    selection_id: Mapped[str] = mapped_column(ForeignKey("image_selections.id", ondelete="CASCADE"),
                                              primary_key=True)
    key: Mapped[str] = mapped_column(String(16), primary_key=True)
