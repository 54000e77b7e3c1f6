"""A dedicated endpoint (``deployments.*``): one serving process, or one Ray Serve application, for one model.

Blob references (``storage.references``): ``weights_sha256`` (the checkpoint) and ``artefact_sha256`` (what is
served: the same checkpoint, or the ONNX export's file) stay alive as long as the deployment exists, so it can
be restarted whatever happens to its model or its export.

``deployment_logs`` holds the endpoint's log: one row per request (time, status, latency, image size,
detections) and one per lifecycle event (launched, ready, crashed and why, stopped). Metrics are computed from
the request rows; ``request_count`` and ``error_count`` are the monotonic counters ``/metrics`` exposes.
``deployment_samples`` holds a resource sample per minute per running deployment (CPU, memory, instances)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, TimestampMixin, id_column, utcnow


class Deployment(TimestampMixin, Base):
    __tablename__ = "deployments"
    __table_args__ = (UniqueConstraint("owner_id", "slug"),)
    __activity__ = "endpoint"  # lanner/teams/activity.py

    id: Mapped[str] = id_column()
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[str | None] = mapped_column(ForeignKey("models.id", ondelete="SET NULL"), index=True)
    project_slug: Mapped[str] = mapped_column(String(128))  # as it was deployed: shown even once the model is gone
    model_slug: Mapped[str] = mapped_column(String(128))
    task: Mapped[str | None] = mapped_column(String(20))
    slug: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(200))
    region: Mapped[str] = mapped_column(String(40))
    backend: Mapped[str] = mapped_column(String(20))  # where it runs: local (a subprocess) or ray (Ray Serve)
    status: Mapped[str] = mapped_column(String(20), default="creating", index=True)
    status_message: Mapped[str | None] = mapped_column(String(500))
    runtime: Mapped[str] = mapped_column(String(20), default="pytorch")  # pytorch or onnx
    export_id: Mapped[str | None] = mapped_column(String(32))  # the ONNX export served, when onnx
    weights_sha256: Mapped[str] = mapped_column(String(64), index=True)
    artefact_sha256: Mapped[str] = mapped_column(String(64), index=True)
    cpu: Mapped[int] = mapped_column(default=1)
    memory_gi: Mapped[int] = mapped_column(default=2)
    min_instances: Mapped[int] = mapped_column(default=1)
    max_instances: Mapped[int] = mapped_column(default=1)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    # The running process or application: the executor's id, where it answers, and its launch time.
    external_id: Mapped[str | None] = mapped_column(String(200))
    url: Mapped[str | None] = mapped_column(String(500))
    launched_at: Mapped[datetime | None]
    ready_at: Mapped[datetime | None]  # since when the current process has been ready
    deployed_at: Mapped[datetime | None]  # first time it was ready
    restarts: Mapped[int] = mapped_column(default=0)  # restarts after a crash, over its life
    crashes: Mapped[int] = mapped_column(default=0)  # crashes in a row, without a stretch of being ready
    retry_at: Mapped[datetime | None]  # a crashed process is launched again from then on (backoff)
    # Metering: instance-seconds billed so far, since when the running instances are not billed yet, at what
    # price per instance-hour, and what the ledger holds already.
    billing_since: Mapped[datetime | None]
    instances: Mapped[int] = mapped_column(default=0)
    billed_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    price_micros_per_hour: Mapped[int] = mapped_column(BigInteger, default=0)
    charged_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    request_count: Mapped[int] = mapped_column(BigInteger, default=0)
    error_count: Mapped[int] = mapped_column(BigInteger, default=0)
    deleted_at: Mapped[datetime | None]


class DeploymentLog(Base):
    __tablename__ = "deployment_logs"
    __table_args__ = (Index("ix_deployment_logs_deployment_created", "deployment_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    deployment_id: Mapped[str] = mapped_column(ForeignKey("deployments.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    severity: Mapped[str] = mapped_column(String(12), default="INFO")
    message: Mapped[str] = mapped_column(Text, default="")
    # A request's row (null for lifecycle events):
    method: Mapped[str | None] = mapped_column(String(10))
    path: Mapped[str | None] = mapped_column(String(300))
    status: Mapped[int | None]
    latency_ms: Mapped[float | None] = mapped_column(Float)
    image_bytes: Mapped[int | None] = mapped_column(BigInteger)
    width: Mapped[int | None]
    height: Mapped[int | None]
    detections: Mapped[int | None]
    user_agent: Mapped[str | None] = mapped_column(String(300))


class DeploymentSample(Base):
    __tablename__ = "deployment_samples"
    __table_args__ = (Index("ix_deployment_samples_deployment_created", "deployment_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    deployment_id: Mapped[str] = mapped_column(ForeignKey("deployments.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    cpu_percent: Mapped[float | None] = mapped_column(Float)  # of the deployment's vCPUs
    memory_percent: Mapped[float | None] = mapped_column(Float)  # of its memoryGi
    instances: Mapped[int] = mapped_column(default=0)
