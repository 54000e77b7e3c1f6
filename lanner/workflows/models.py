"""Saved workflows (the SDK's ``agents.*``): a named graph document per workspace, replaced whole at a version.

The graph is stored as the SDK sent it (``graph``); what Lanner can run of it is derived at each save and kept
in columns beside it, so the predict path reads a few columns instead of parsing a document: the one runnable
template, *collect a deployment's uncertain detections into a dataset* (``workflows.template``), is the
deployment and dataset it names, the confidence band, the sampling rate and the daily cap.

Counters of the template (``captured_day``/``captured_today``) are claimed with one conditional UPDATE per
capture, so the daily cap holds across threads and server processes on one database."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, TimestampMixin, id_column


class Workflow(TimestampMixin, Base):
    __tablename__ = "workflows"
    __table_args__ = (Index("ix_workflows_owner_updated", "owner_id", "updated_at"),)

    id: Mapped[str] = id_column()
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[int] = mapped_column(default=1)
    graph: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    deleted_at: Mapped[datetime | None]  # "moves an agent to trash": gone from lists, and it stops collecting
    # The collect template, when the graph is one that resolved (else all null and ``active`` false):
    active: Mapped[bool] = mapped_column(default=False, index=True)
    deployment_id: Mapped[str | None] = mapped_column(ForeignKey("deployments.id", ondelete="SET NULL"), index=True)
    dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"))
    conf_low: Mapped[float] = mapped_column(Float, default=0.25)
    conf_high: Mapped[float] = mapped_column(Float, default=0.6)
    include_empty: Mapped[bool] = mapped_column(default=False)  # an answer with no detection counts as uncertain
    rate: Mapped[float] = mapped_column(Float, default=0.1)  # the share of uncertain predictions kept
    daily_cap: Mapped[int] = mapped_column(default=100)  # at most this many images a day (UTC)
    split: Mapped[str] = mapped_column(String(10), default="train")
    captured_day: Mapped[str | None] = mapped_column(String(10))  # YYYY-MM-DD (UTC) of captured_today
    captured_today: Mapped[int] = mapped_column(default=0)
    captured_total: Mapped[int] = mapped_column(BigInteger, default=0)
    last_captured_at: Mapped[datetime | None]
