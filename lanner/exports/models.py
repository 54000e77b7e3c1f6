"""The export job: one row per requested export of a model, its durable state (``exports/jobs.py``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, TimestampMixin, id_column
from lanner.projects.models import ModelRecord


class ModelExport(TimestampMixin, Base):
    """``fingerprint`` names what the artefact is made of (the weights' digest, the format, the normalised
    arguments and, for TensorRT, the GPU type): the same export asked again reuses this one.

    Blob references (``storage.references``): ``source_sha256`` keeps the weights alive while the job may still
    download them and is cleared when it ends; ``sha256`` is the artefact's, for as long as the row exists."""

    __tablename__ = "model_exports"
    __activity__ = "export"  # lanner/teams/activity.py
    __activity_statuses__ = {"cancelled": "cancelled"}

    id: Mapped[str] = id_column()
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    format: Mapped[str] = mapped_column(String(20))
    args: Mapped[dict[str, Any]] = mapped_column(default=dict)
    gpu_type: Mapped[str] = mapped_column(String(64), default="cpu")
    fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    source_sha256: Mapped[str | None] = mapped_column(String(64), index=True)
    filename: Mapped[str] = mapped_column(String(255))  # what the download is called: tiny.onnx, tiny_ncnn_model.zip
    sha256: Mapped[str | None] = mapped_column(String(64), index=True)
    size: Mapped[int | None] = mapped_column(BigInteger)
    error: Mapped[str | None] = mapped_column(Text)
    failed_at: Mapped[datetime | None]
    executor: Mapped[str | None] = mapped_column(String(20))
    external_id: Mapped[str | None] = mapped_column(String(200))  # the executor's id of the running attempt
    attempt: Mapped[int] = mapped_column(default=0)
    slot: Mapped[str | None] = mapped_column(String(32))  # the running attempt's upload token
    started_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]

    def activity_subject(self, session: Any) -> tuple[str, str] | None:
        """(workspace, name) for the activity log: the model and the format."""
        model = session.get(ModelRecord, self.model_id)
        return None if model is None else (self.owner_id, f"{model.activity_subject(session)[1]} {self.format}")
