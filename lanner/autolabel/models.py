"""An auto-annotation (or face-blur) run of one dataset, and the images it has finished.

``AutolabelImage`` is the idempotency record: one row per (run, image) the server has recorded. A chunk the
worker posts twice, or the next attempt of a worker that was killed mid-batch, finds its images there and
changes nothing; the next attempt is launched with only the images that have no row."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, TimestampMixin, id_column


class AutolabelJob(TimestampMixin, Base):
    """``keys`` are the images to process, chosen when the run was asked for (the unlabelled ones, or all with
    ``include_annotated``); ``version`` the dataset version saved before it. ``charged_micros`` is what the
    ledger holds for it: ``processed`` × ``price_micros``, brought up chunk by chunk."""

    __tablename__ = "autolabel_jobs"

    id: Mapped[str] = id_column()
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)  # who pays
    requested_by: Mapped[str | None] = mapped_column(String(32))
    model_id: Mapped[str | None] = mapped_column(ForeignKey("models.id", ondelete="SET NULL"))
    model_ref: Mapped[str | None] = mapped_column(String(300))  # owner/project/model, for labelled_by
    weights_sha256: Mapped[str | None] = mapped_column(String(64), index=True)  # held while the run may read it
    operation: Mapped[str] = mapped_column(String(10), default="annotate")  # annotate | blur
    preview: Mapped[bool] = mapped_column(Boolean, default=False)
    confidence: Mapped[float] = mapped_column(Float, default=0.25)
    iou: Mapped[float] = mapped_column(Float, default=0.7)
    box_scale: Mapped[float] = mapped_column(Float, default=1.0)
    include_annotated: Mapped[bool] = mapped_column(Boolean, default=False)
    class_map: Mapped[list[Any] | None] = mapped_column()  # dataset class of each model class (None: dropped)
    imgsz: Mapped[int] = mapped_column(Integer, default=640)
    keys: Mapped[list[Any]] = mapped_column(default=list)
    total: Mapped[int] = mapped_column(Integer, default=0)
    processed: Mapped[int] = mapped_column(Integer, default=0)
    annotations: Mapped[int] = mapped_column(Integer, default=0)
    faces: Mapped[int] = mapped_column(Integer, default=0)
    partial_images: Mapped[int] = mapped_column(Integer, default=0)
    classes: Mapped[list[Any]] = mapped_column(default=list)  # dataset classes the run added labels of
    previews: Mapped[list[Any] | None] = mapped_column()  # preview runs: [{key, labels}] (nothing applied)
    version: Mapped[int | None] = mapped_column(Integer)
    price_micros: Mapped[int] = mapped_column(Integer, default=0)  # per image
    charged_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    stopping: Mapped[bool] = mapped_column(Boolean, default=False)
    dismissed: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    executor: Mapped[str | None] = mapped_column(String(20))
    external_id: Mapped[str | None] = mapped_column(String(200))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    slot: Mapped[str | None] = mapped_column(String(32))  # the running attempt's token: older attempts are refused
    started_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]


class AutolabelImage(Base):
    """One image a run has recorded (labels added, or pixels blurred): never recorded twice."""

    __tablename__ = "autolabel_images"

    job_id: Mapped[str] = mapped_column(ForeignKey("autolabel_jobs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(16), primary_key=True)
    added: Mapped[int] = mapped_column(Integer, default=0)  # labels added (faces blurred)
