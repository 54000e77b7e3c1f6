"""Calibration points: measured training speed, one row per probe or finished run."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, utcnow


class CalibrationPoint(Base):
    __tablename__ = "calibration_points"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    gpu_type: Mapped[str] = mapped_column(String(40), index=True)
    source: Mapped[str] = mapped_column(String(20))          # probe | run | quick_run
    model_name: Mapped[str] = mapped_column(String(200))
    family: Mapped[str] = mapped_column(String(40))
    gflops: Mapped[float]                                     # forward GFLOPs per image at imgsz
    imgsz: Mapped[int]
    batch: Mapped[int]
    train_images: Mapped[int]
    val_images: Mapped[int]
    workers: Mapped[int]
    host_cpus: Mapped[float]
    cache: Mapped[bool] = mapped_column(default=False)
    epoch_seconds: Mapped[float]
    startup_seconds: Mapped[float | None]
    peak_memory_gb: Mapped[float | None]
    run_id: Mapped[int | None] = mapped_column(index=True, unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
