"""Projects group models; a model is a trained (or to-be-trained) network with its history."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from lanner.db import Base, TimestampMixin, id_column, utcnow
from lanner.resources import OwnedResource

UNTRAINED = "untrained"
# What a model's status can be: untrained, or its latest run's status as the wire shows it. Only
# ``lanner.training.state`` writes it (a guarded change with a StatusEvent).
MODEL_STATUSES = ("pending", UNTRAINED, "starting", "running", "completed", "failed", "cancelled")
TASKS = ("detect", "segment", "semantic", "depth", "classify", "pose", "obb")


class Project(OwnedResource, Base):
    """Owner, slug, name, description, visibility, tags, licence and metadata come from ``OwnedResource``."""

    __tablename__ = "projects"
    __activity__ = "project"  # lanner/teams/activity.py

    icon_color: Mapped[str | None] = mapped_column(String(20))
    archived: Mapped[bool] = mapped_column(default=False)
    # ``projects.clone``: the project this one was copied from (no foreign key: the original may go first).
    cloned_from_id: Mapped[str | None] = mapped_column(String(32), index=True)

    models: Mapped[list[ModelRecord]] = relationship(back_populates="project", cascade="all, delete-orphan")


class ModelRecord(TimestampMixin, Base):
    """Named ModelRecord so it never shadows pydantic's or SQLAlchemy's ``Model``."""

    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("project_id", "slug"),)
    __activity__ = "model"  # lanner/teams/activity.py

    id: Mapped[str] = id_column()
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    slug: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    task: Mapped[str | None] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(20), default=UNTRAINED)
    epochs: Mapped[int | None]
    best_epoch: Mapped[int | None]
    best_fitness: Mapped[float | None]
    metrics: Mapped[dict[str, Any] | None] = mapped_column()
    train_args: Mapped[dict[str, Any] | None] = mapped_column()
    results: Mapped[dict[str, Any] | None] = mapped_column()
    class_names: Mapped[list[Any] | None] = mapped_column()
    plots: Mapped[list[Any] | None] = mapped_column()
    environment: Mapped[dict[str, Any] | None] = mapped_column()
    model_info: Mapped[dict[str, Any] | None] = mapped_column()
    training_error: Mapped[dict[str, Any] | None] = mapped_column()
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    base_model: Mapped[str | None] = mapped_column(String(300))
    weights_sha256: Mapped[str | None] = mapped_column(String(64), index=True)
    weights_size: Mapped[int | None] = mapped_column(BigInteger)
    weights_name: Mapped[str | None] = mapped_column(String(200))
    started_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]
    # After a quick test run: its measured speed applied to the full run (Lanner extension).
    full_run_estimate: Mapped[dict[str, Any] | None] = mapped_column()
    # ``models.clone``: the model this one was copied from, weights shared by digest (no foreign key: the
    # original may be deleted first; the copy keeps its weights).
    cloned_from_id: Mapped[str | None] = mapped_column(String(32), index=True)

    project: Mapped[Project] = relationship(back_populates="models")

    def activity_subject(self, session: Any) -> tuple[str, str]:
        """(workspace, name) for the activity log: ``project/model``."""
        project = self.project if self.project is not None else session.get(Project, self.project_id)
        return self.owner_id, f"{project.slug if project is not None else '?'}/{self.slug}"


class StartingPoint(Base):
    """A model the operator offers as a pretrained start for new models of its task, beside the official ones
    (``lanner.projects.starting``): the demo's own, trained on this machine, is the first. Readable like its
    project; removed with its model."""

    __tablename__ = "starting_points"

    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), primary_key=True)
    note: Mapped[str] = mapped_column(String(300), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
