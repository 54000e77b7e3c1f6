"""The assistant of a dataset: its settings, its training rounds and the uncertainty of each unlabelled image.

A round is one ordinary training run (``training.launch.start``) of a model ``round-N`` in the owner's project
``<dataset>-assistant``; the round row only remembers why it started (how many images were labelled), how it
ended (the run's mAP50, or the reason it failed) and when the unlabelled images were scored by its model."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, id_column, utcnow

DEFAULT_MIN_LABELS = 20
DEFAULT_EVERY = 25
DEFAULT_EPOCHS = 20
DEFAULT_IMGSZ = 320

# Round statuses: training (its run is active), scoring (its run completed; the unlabelled images are being
# scored), completed, failed (``reason`` says why).
TRAINING, SCORING, COMPLETED, FAILED = "training", "scoring", "completed", "failed"


class Assistant(Base):
    __tablename__ = "assistants"

    id: Mapped[str] = id_column()
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), unique=True)
    enabled: Mapped[bool] = mapped_column(default=False, index=True)
    min_labels: Mapped[int] = mapped_column(default=DEFAULT_MIN_LABELS)
    every: Mapped[int] = mapped_column(default=DEFAULT_EVERY)
    gpu_type: Mapped[str] = mapped_column(String(64), default="cpu")
    epochs: Mapped[int] = mapped_column(default=DEFAULT_EPOCHS)
    imgsz: Mapped[int] = mapped_column(default=DEFAULT_IMGSZ)
    # The hidden dataset each round trains on: the labelled images only (``training_data``).
    training_dataset_id: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)  # settings saved: a failed round may retry


class AssistantRound(Base):
    __tablename__ = "assistant_rounds"
    __table_args__ = (UniqueConstraint("assistant_id", "round"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    assistant_id: Mapped[str] = mapped_column(ForeignKey("assistants.id", ondelete="CASCADE"), index=True)
    round: Mapped[int]
    labelled: Mapped[int]  # labelled images when it started
    model_id: Mapped[str | None] = mapped_column(ForeignKey("models.id", ondelete="SET NULL"))
    run_id: Mapped[int | None]
    status: Mapped[str] = mapped_column(String(20), default=TRAINING)
    reason: Mapped[str | None] = mapped_column(String(500))
    map50: Mapped[float | None] = mapped_column(Float)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    completed_at: Mapped[datetime | None]
    scored: Mapped[int] = mapped_column(default=0)  # unlabelled images scored by its model


class AssistantScore(Base):
    """How unsure the newest assistant is about one image (higher: less sure); "label next" sorts by it."""

    __tablename__ = "assistant_scores"
    __table_args__ = (Index("ix_assistant_scores_assistant_score", "assistant_id", "score"),)

    assistant_id: Mapped[str] = mapped_column(ForeignKey("assistants.id", ondelete="CASCADE"), primary_key=True)
    item_key: Mapped[str] = mapped_column(String(16), primary_key=True)
    round: Mapped[int]
    score: Mapped[float] = mapped_column(Float)
