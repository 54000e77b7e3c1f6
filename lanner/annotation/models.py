"""Proposals served to the editor: which model proposed which labels for which image, and, once the image was
saved, how many of them the person kept unchanged (the assistant's "accepted unchanged" share)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, utcnow


class LabelProposal(Base):
    """One model's proposals for one image, open until the image is next saved. No foreign key to the model:
    a model may be deleted while its counts still tell how good it was."""

    __tablename__ = "label_proposals"
    __table_args__ = (Index("ix_label_proposals_open", "dataset_id", "item_key", "resolved_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    item_key: Mapped[str] = mapped_column(String(16))
    model_id: Mapped[str] = mapped_column(String(32), index=True)
    model_ref: Mapped[str] = mapped_column(String(300))  # owner/project/model, for labelled_by
    labels: Mapped[list[Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    resolved_at: Mapped[datetime | None]
    shown: Mapped[int] = mapped_column(default=0)
    accepted_unchanged: Mapped[int | None]
