"""Learning from runs: a run becomes a calibration point of the GPU advisor (epoch time, start-up, workload,
peak memory). A completed run records its point when it completes; a running one refreshes its point as its
epochs come in (the supervisor asks about once a minute), so the advisor learns before the run ends. Recording
reads training's tables; fitting the points is the advisor's (``lanner.gpus.fit``)."""

from __future__ import annotations

import logging
import re
import statistics
from itertools import chain
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetVersion
from lanner.db import Database
from lanner.gpus.catalogue import Catalogue
from lanner.gpus.models import CalibrationPoint
from lanner.gpus.probe import gpu_type_for_name
from lanner.projects.models import ModelRecord
from lanner.training import console, refs
from lanner.training.models import ConsoleChunk, EpochMetric, Run, SystemMetric
from lanner.training.state import RunStatus

log = logging.getLogger("lanner.training.learn")
# The trainer logs its dataset scan ("train: Scanning .../labels/train... 16 images, 0 backgrounds, ...");
# the protocol itself never says how many images a run trains on. Console rows are stored plain
# (``training.console``); the codes are removed here too for rows stored before that.
_SCAN = re.compile(r"\b(train|val): Scanning .*?(\d+) images")


def _arg(args: dict[str, Any], key: str, default: Any, kind: type) -> Any:
    try:
        return kind(float(args.get(key, default)))
    except (TypeError, ValueError):
        return default


def _image_counts(session: Session, run: Run) -> dict[str, int]:
    """Images per split: from the trainer's scan lines (what it really read), else, for a run on a Lanner dataset,
    from the dataset (the version the run captured, or the dataset as it is now)."""
    counts: dict[str, int] = {}
    chunks = session.scalars(select(ConsoleChunk.content).where(ConsoleChunk.run_id == run.id)
                             .order_by(ConsoleChunk.chunk_id).limit(200))
    for content in chunks:
        for split, number in _SCAN.findall(console.plain(content)):
            counts[split] = int(number)  # the last scan line of a split has the final count
    return counts if "train" in counts else _dataset_counts(session, run)


def _dataset_counts(session: Session, run: Run) -> dict[str, int]:
    manifest_id = None
    if run.dataset_version_id:
        version = session.get(DatasetVersion, run.dataset_version_id)
        manifest_id = version.manifest_id if version is not None else None
    parts = refs.dataset_parts(str((run.train_args or {}).get("data") or ""))
    if manifest_id is None and parts is not None:
        manifest_id = session.scalar(select(Dataset.manifest_id).join(User, User.id == Dataset.owner_id)
                                     .where(User.username == parts[0].lower(), Dataset.slug == parts[1]))
    if manifest_id is None:
        return {}
    counts = datasets_service.counts(session, manifest_id)
    return {split: counts[split] for split in ("train", "val") if counts[split]}


def epoch_timing(session: Session, run: Run) -> tuple[list[Any], float | None]:
    """The run's (epoch, created_at) rows in order, and the median time between consecutive epochs (None with
    fewer than two in a row): the measured epoch time of both calibration and quick-run re-estimates."""
    stamps = list(session.execute(select(EpochMetric.epoch, EpochMetric.created_at)
                                  .where(EpochMetric.run_id == run.id).order_by(EpochMetric.epoch)))
    durations = [(b.created_at - a.created_at).total_seconds() for a, b in zip(stamps, stamps[1:], strict=False)
                 if b.epoch == a.epoch + 1]
    return stamps, statistics.median(durations) if durations else None


def peak_gpu_memory_gb(session: Session, run: Run, gpu_type: str, *, catalogue: Catalogue) -> float | None:
    """The highest GPU memory the trainer's system metrics showed (percent of the card, as nvidia-smi counts
    it), in GB of this GPU type; None on the CPU or without GPU readings."""
    if gpu_type == "cpu" or gpu_type not in catalogue:
        return None
    peak = 0.0
    readings = chain(session.scalars(select(SystemMetric.data).where(SystemMetric.run_id == run.id)),
                     session.scalars(select(EpochMetric.system).where(EpochMetric.run_id == run.id)))
    for data in readings:  # system_metrics events, and the readings inside epoch_end events
        gpus = (data or {}).get("gpus") or ((data or {}).get("metrics") or {}).get("gpus") or {}
        for reading in gpus.values() if isinstance(gpus, dict) else []:
            try:
                peak = max(peak, float(reading.get("memory") or 0.0))
            except (AttributeError, TypeError, ValueError):
                continue
    return round(peak / 100.0 * catalogue.get(gpu_type).vram_gb, 2) if peak > 0 else None


def record_run(session: Session, model: ModelRecord, run: Run, *, catalogue: Catalogue,
               refresh: bool = True) -> CalibrationPoint | None:
    """Turn a run into its calibration point (one per run: a later call with more epochs replaces it); None when
    it lacks what a point needs (2+ epochs, sizes). ``refresh=False`` keeps an existing point."""
    existing = session.scalar(select(CalibrationPoint).where(CalibrationPoint.run_id == run.id))
    if existing is not None and not refresh:
        return None
    if run.gpu_count > 1:
        return None  # a point is one GPU's speed; several GPUs' epochs would skew the type's calibration
    stamps, epoch_seconds = epoch_timing(session, run)
    if epoch_seconds is None:
        return None
    counts = _image_counts(session, run)
    args = run.train_args or {}
    if "train" not in counts:
        return None
    fraction = _arg(args, "fraction", 1.0, float)
    if _arg(args, "batch", 16, float) < 1:
        return None  # AutoBatch: the batch the trainer chose is not reported
    environment = run.environment or {}
    device = str(run.device or args.get("device") or "")
    if run.gpu_type:  # a run Lanner launched: it knows the type it placed the run on
        gpu_type: str | None = run.gpu_type
    elif device in ("cpu", "") or "cuda" not in device:
        gpu_type = "cpu"
    else:
        gpu_type = gpu_type_for_name(str(environment.get("gpuType") or ""))
    if gpu_type is None:
        return None  # a GPU the catalogue does not list: its timings would skew another type's
    info = model.model_info or {}
    imgsz = _arg(args, "imgsz", 640, int)
    gflops = float(info.get("gflops") or 0.0)
    family = str(args.get("model", "")).split(".")[0].rstrip("nsmlx") or "unknown"
    if not gflops:
        try:
            from lanner.gpus.profile import model_profile  # torch: loaded only when a run lacks its GFLOPs

            gflops = model_profile(str(args.get("model"))).gflops(imgsz)
        except Exception:
            return None
    startup = (stamps[0].created_at - run.created_at).total_seconds() - epoch_seconds
    point = CalibrationPoint(
        gpu_type=gpu_type, source="quick_run" if fraction < 1 or _arg(args, "epochs", 100, int) <= 3 else "run",
        model_name=str(args.get("model", "")), family=family, gflops=gflops, imgsz=imgsz,
        batch=_arg(args, "batch", 16, int), train_images=max(1, round(counts["train"] * fraction)),
        val_images=counts.get("val", 0), workers=_arg(args, "workers", 8, int),
        host_cpus=float(environment.get("cpuCount") or 1), cache=str(args.get("cache")) in ("True", "ram", "disk"),
        epoch_seconds=epoch_seconds, startup_seconds=max(0.0, startup),
        peak_memory_gb=peak_gpu_memory_gb(session, run, gpu_type, catalogue=catalogue), run_id=run.id)
    if existing is not None:  # replaced only by a complete point: a failed refresh keeps the old one
        session.delete(existing)
        session.flush()
    session.add(point)
    session.flush()
    return point


def learn_from(session: Session, model: ModelRecord, run: Run, *, catalogue: Catalogue) -> None:
    """A completed run teaches the GPU advisor its real speed; a failure here must never fail the event."""
    try:
        with session.begin_nested():
            record_run(session, model, run, catalogue=catalogue)
    except Exception:  # calibration is best effort
        log.exception("could not record run %s as a calibration point", run.id)


def learn_from_running(db: Database, *, catalogue: Catalogue) -> None:
    """A run still training already teaches the GPU advisor: its calibration point is refreshed with the
    epochs so far (the completed run's point replaces it at the end)."""
    with db.session() as session:
        running = list(session.scalars(select(Run).where(
            Run.executor.is_not(None), Run.status == RunStatus.RUNNING.value)))
        for run in running:
            model = session.get(ModelRecord, run.model_id)
            if model is None:
                continue
            try:
                with session.begin_nested():
                    record_run(session, model, run, catalogue=catalogue, refresh=True)
            except Exception:  # best effort: calibration never stops supervision
                log.exception("could not refresh the calibration point of running run %s", run.id)
