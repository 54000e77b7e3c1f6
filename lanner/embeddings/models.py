"""The embedding job and the vectors it leaves.

A vector depends only on the image's bytes, the model's weights and the encoding (``embeddings.encoding``), so
it is stored once per (vector key, image sha256) (the key: ``encoding.vector_key`` of the weights' digest),
whatever datasets hold the image: a dataset analysed again after new uploads embeds only the new images, a
crashed job's next attempt only those still missing, and a clone or a version costs nothing. A dataset's analysis
(``EmbeddingJob`` completed) names the dataset revision and the vector key it ran on: the dataset is fresh while
both are unchanged (``embeddings.service.freshness``); a new encoding makes it stale. A job whose model the
caller named (``chosen``) makes that model the dataset's until another is named."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Integer, LargeBinary, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, TimestampMixin, id_column, utcnow


class EmbeddingJob(TimestampMixin, Base):
    """One ``datasets.create_embeddings``. ``status`` changes only through ``embeddings.jobs``; ``external_id``,
    ``attempt`` and ``slot`` as on an export (``exports.models.ModelExport``): the executor's id of the attempt
    that may be running, and the attempt's token in its signed worker links (an older attempt's are refused)."""

    __tablename__ = "embedding_jobs"

    id: Mapped[str] = id_column()
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[str | None] = mapped_column(ForeignKey("models.id", ondelete="SET NULL"))
    model_sha256: Mapped[str] = mapped_column(String(64), index=True)  # encoding.vector_key(weights' digest)
    model_label: Mapped[str] = mapped_column(String(300))  # ul://owner/project/model, for people and the log
    chosen: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())  # named by the caller
    revision: Mapped[int]  # the dataset's revision when the job was asked for
    imgsz: Mapped[int]
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    total: Mapped[int] = mapped_column(default=0)  # distinct images of the dataset at the job's last count
    processed: Mapped[int] = mapped_column(default=0)  # of those, with a vector under model_sha256
    failed_downloads: Mapped[int] = mapped_column(default=0)
    failed_inference: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(Text)
    executor: Mapped[str | None] = mapped_column(String(20))
    external_id: Mapped[str | None] = mapped_column(String(200))
    attempt: Mapped[int] = mapped_column(default=0)
    slot: Mapped[str | None] = mapped_column(String(32))
    started_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]


class ImageEmbedding(Base):
    """One image's vector under one model: float32, L2-normalised (inner product = cosine similarity)."""

    __tablename__ = "image_embeddings"

    model_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    image_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    dim: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class EmbeddingLayout(TimestampMixin, Base):
    """A dataset's map (``embeddings.maps``): the 2-D layout of its vectors under ``model_sha256`` as they were
    at ``revision``, one per dataset (a new analysis replaces it). ``data`` is an ``.npz`` of the digests
    (n x 32 bytes), the coordinates (n x 2 float32) and the clusters (n int32); NULL while the embedding queue
    has it to compute (``error`` when that failed). Tens of bytes per image, read whole when a page is served
    and kept in memory: a database column, like the vectors it is made from."""

    __tablename__ = "embedding_layouts"

    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True)
    model_sha256: Mapped[str] = mapped_column(String(64))
    revision: Mapped[int]
    count: Mapped[int] = mapped_column(default=0)
    data: Mapped[bytes | None] = mapped_column(LargeBinary)
    error: Mapped[str | None] = mapped_column(Text)
    computed_at: Mapped[datetime | None]


class EmbeddingHead(Base):
    """The copy-detection head of one vector key (``embeddings.head``): trained once, by the first embedding job
    of that key to finish with enough images, and applied to every vector of that key a similar-images index
    holds, whatever the dataset (one space per key, so datasets can be searched together). ``data`` is the
    head's ``.npz`` (about 2.6 MB for a 512-number vector), ``sha256`` its digest (which names the indexes built
    with it); ``images`` how many images it was trained on."""

    __tablename__ = "embedding_heads"

    model_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64))
    images: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
