"""Runs and what they report: epochs, console, system metrics and staged checkpoint uploads."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, utcnow
from lanner.projects.models import ModelRecord


class Run(Base):
    """One trainer process reporting into a model. Status changes only through ``training/state.py``."""

    __tablename__ = "runs"
    __activity__ = "run"  # started and cancelled runs of a team: lanner/teams/activity.py
    __activity_statuses__ = {"cancelled": "cancelled"}

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(20), default="pending")  # state.create_run sets it
    termination_reason: Mapped[str | None] = mapped_column(String(40))
    epochs: Mapped[int | None]
    device: Mapped[str | None] = mapped_column(String(100))
    train_args: Mapped[dict[str, Any] | None] = mapped_column()
    environment: Mapped[dict[str, Any] | None] = mapped_column()
    error: Mapped[dict[str, Any] | None] = mapped_column()
    # Hash of the training_started body: a retried start returns the same run instead of a new model.
    start_fingerprint: Mapped[str | None] = mapped_column(String(64), index=True)
    # Who started it: the person behind the key or session (a team's runs are started by many of its members).
    # No foreign key: on PostgreSQL its check share-locks the user's row, which concurrent starts then deadlock
    # on with the ledger's lock of the same row; a removed user shows as such.
    started_by_id: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    last_event_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]

    # Runs Lanner launched itself (training.start); a run reported by an outside trainer leaves these empty.
    executor: Mapped[str | None] = mapped_column(String(20))
    gpu_type: Mapped[str | None] = mapped_column(String(64))
    gpu_count: Mapped[int] = mapped_column(default=1, server_default="1")  # GPUs of gpu_type on one node (DDP)
    external_id: Mapped[str | None] = mapped_column(String(200))  # pid or Ray submission id of this attempt
    attempt: Mapped[int] = mapped_column(default=0)
    launch: Mapped[dict[str, Any] | None] = mapped_column()  # what the worker runs (see training/worker.py)
    api_key_id: Mapped[str | None] = mapped_column(String(32))  # the run-scoped key the worker reports with
    estimate: Mapped[dict[str, Any] | None] = mapped_column()
    smoke: Mapped[bool] = mapped_column(default=False)
    dataset_version_id: Mapped[str | None] = mapped_column(String(32))
    # Billing: integer micro-dollars; seconds of finished attempts plus the running one since attempt_started_at.
    # The price is the run's whole: one GPU's times gpu_count (``billing.metering.charge_for`` bills each alike).
    price_micros_per_hour: Mapped[int | None] = mapped_column(BigInteger)
    hold_micros: Mapped[int | None] = mapped_column(BigInteger)
    max_cost_micros: Mapped[int | None] = mapped_column(BigInteger)
    attempt_started_at: Mapped[datetime | None]
    billed_seconds: Mapped[float] = mapped_column(default=0.0)
    worker_exited_at: Mapped[datetime | None]  # the current attempt's process or job is known to be gone
    provisioning_since: Mapped[datetime | None]  # its job waits for a node its pool is bringing up (not billed)
    settled_at: Mapped[datetime | None]

    def activity_subject(self, session: Any) -> tuple[str, str] | None:
        """(workspace, name) for the activity log: the run's model (a new run has no number before the flush)."""
        model = session.get(ModelRecord, self.model_id)
        return None if model is None else model.activity_subject(session)


class RunEvent(Base):
    """Audit trail of status transitions (who moved a run, from what, to what, why)."""

    __tablename__ = "run_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    from_status: Mapped[str | None] = mapped_column(String(20))
    to_status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def changed_row(self, session: Any) -> Run | None:
        """The run this event moved: for the activity log (``lanner.teams.activity``)."""
        return session.get(Run, self.run_id)


class _RunOutput:
    """What a run reports about its model (epochs, console text): kept per model, traced to the run."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"))
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)


class EpochMetric(_RunOutput, Base):
    """One row per (model, epoch): a retried or resumed epoch replaces itself instead of duplicating."""

    __tablename__ = "epoch_metrics"
    __table_args__ = (UniqueConstraint("model_id", "epoch"),)

    epoch: Mapped[int]
    metrics: Mapped[dict[str, Any]] = mapped_column()
    fitness: Mapped[float | None]
    system: Mapped[dict[str, Any] | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ConsoleChunk(_RunOutput, Base):
    __tablename__ = "console_chunks"
    __table_args__ = (UniqueConstraint("model_id", "chunk_id"),)

    chunk_id: Mapped[int] = mapped_column(BigInteger)
    content: Mapped[str] = mapped_column(Text)
    line_count: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SystemMetric(Base):
    __tablename__ = "system_metrics"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    data: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class StagedUpload(Base):
    """A checkpoint upload slot handed to a trainer; ``checkpoint_saved`` promotes it onto the model."""

    __tablename__ = "staged_uploads"

    path: Mapped[str] = mapped_column(String(300), primary_key=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    filename: Mapped[str] = mapped_column(String(200))
    sha256: Mapped[str | None] = mapped_column(String(64), index=True)
    size: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    uploaded_at: Mapped[datetime | None]
    promoted_at: Mapped[datetime | None]


class PoolLaunch(Base):
    """One wait of a run for a node of its pool: how long the autoscaler took to bring one up (``up``), or that
    none came within the pool's start timeout (``timeout``). Their median is the start time runs are told."""

    __tablename__ = "pool_launches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    pool: Mapped[str] = mapped_column(String(64), index=True)
    gpu_type: Mapped[str] = mapped_column(String(64))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), index=True)
    requested_at: Mapped[datetime] = mapped_column()
    ended_at: Mapped[datetime] = mapped_column(default=utcnow)
    outcome: Mapped[str] = mapped_column(String(20))  # up | timeout | cancelled
    seconds: Mapped[float] = mapped_column()


class PoolUsage(Base):
    """Node-seconds each pool had up per UTC day, sampled from the cluster: what the operator paid for."""

    __tablename__ = "pool_usage"

    pool: Mapped[str] = mapped_column(String(64), primary_key=True)
    day: Mapped[str] = mapped_column(String(10), primary_key=True)  # YYYY-MM-DD, UTC
    node_seconds: Mapped[float] = mapped_column(default=0.0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
