"""The scores job and the scores it leaves.

A ``ReviewJob`` runs one model (its weights' digest kept) over a dataset as it was at ``revision``; each image's
predictions come back in chunks and are scored against the image's labels then (``review.service``), one
``ImageScore`` row per image, replaced by the next job. The scores are *fresh* while the dataset's revision is the
job's and its model still has the same weights (``service.freshness``): a label edit makes them stale, as it should
(the edit may be the fix). ``reviewed_at`` marks what the editor's Review queue opened in this pass."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, TimestampMixin, id_column


class ReviewJob(TimestampMixin, Base):
    """``status`` changes only through ``review.jobs``; ``external_id``, ``attempt`` and ``slot`` as on an
    auto-annotation run (``autolabel.models.AutolabelJob``), whose worker this job's attempts run."""

    __tablename__ = "review_jobs"

    id: Mapped[str] = id_column()
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[str | None] = mapped_column(ForeignKey("models.id", ondelete="SET NULL"))
    model_sha256: Mapped[str] = mapped_column(String(64))
    model_label: Mapped[str] = mapped_column(String(300))
    revision: Mapped[int]
    imgsz: Mapped[int] = mapped_column(Integer, default=640)
    confidence: Mapped[float] = mapped_column(Float, default=0.05)
    class_map: Mapped[list[Any] | None] = mapped_column()
    keys: Mapped[list[Any]] = mapped_column(default=list)
    total: Mapped[int] = mapped_column(Integer, default=0)
    processed: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    error: Mapped[str | None] = mapped_column(Text)
    executor: Mapped[str | None] = mapped_column(String(20))
    external_id: Mapped[str | None] = mapped_column(String(200))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    slot: Mapped[str | None] = mapped_column(String(32))
    started_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]


class ImageScore(Base):
    """One image's scores from the dataset's latest job. ``mistakenness`` is the raw worst finding while the job
    runs and the calibrated one (``scoring.calibrated``) once it completed; ``uniqueness`` is NULL without an
    embedding analysis."""

    __tablename__ = "image_scores"
    __table_args__ = (Index("ix_image_scores_dataset_mistakenness", "dataset_id", "mistakenness"),)

    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(16), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("review_jobs.id", ondelete="CASCADE"), index=True)
    mistakenness: Mapped[float] = mapped_column(Float, default=0.0)
    uniqueness: Mapped[float | None] = mapped_column(Float)
    findings: Mapped[list[Any]] = mapped_column(default=list)
    kinds: Mapped[dict[str, Any]] = mapped_column(default=dict)  # raw worst score per kind (``scoring.calibrated``)
    reviewed_at: Mapped[datetime | None]
