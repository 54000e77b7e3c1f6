"""What training shows of a model: its job (``GET /api/models/.../training``), the training fields of the model
view (epoch results, console, compute cost, run history) and the epoch counts of the project view. Projects
show these without importing training: ``model_hooks`` hands them over, with the delete guard."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.billing import service as billing
from lanner.billing.metering import billing_seconds, elapsed_seconds
from lanner.db import iso, utcnow
from lanner.gpus.catalogue import Catalogue
from lanner.projects.models import ModelRecord
from lanner.projects.schemas import numeric_metrics
from lanner.projects.service import ModelHooks
from lanner.training.models import ConsoleChunk, EpochMetric, Run, RunEvent
from lanner.training.service import ensure_no_unsettled_runs, latest_run
from lanner.training.state import WAITING, wire_status


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def job_view(session: Session, model: ModelRecord, *, catalogue: Catalogue) -> dict[str, Any] | None:
    """``models.training`` job: status, progress and timing of the model's latest run."""
    run = latest_run(session, model.id)
    if run is None:
        return None
    epochs = list(session.scalars(select(EpochMetric).where(EpochMetric.run_id == run.id)
                                  .order_by(EpochMetric.epoch)))
    total = float(run.epochs or model.epochs or 0)
    done = float(epochs[-1].epoch + 1) if epochs else 0.0
    end = run.completed_at or utcnow()
    elapsed_ms = max(0.0, (end - (run.started_at or run.created_at)).total_seconds() * 1000)
    per_epoch = 0.0
    if len(epochs) >= 2:
        span = (epochs[-1].created_at - epochs[0].created_at).total_seconds() * 1000
        per_epoch = span / (len(epochs) - 1)
    elif epochs and run.started_at:
        per_epoch = max(0.0, (epochs[0].created_at - run.started_at).total_seconds() * 1000)
    remaining = max(0.0, total - done)
    args = run.train_args or {}
    train_args = {k: v for k, v in {"model": args.get("model"), "epochs": _as_float(args.get("epochs")),
                                    "batch": _as_float(args.get("batch")),
                                    "imgsz": _as_float(args.get("imgsz"))}.items() if v is not None}
    compute = None
    if run.gpu_type:
        gpu = catalogue.get(run.gpu_type) if run.gpu_type in catalogue else None
        compute = {"gpuType": run.gpu_type, "gpuDisplayName": gpu.display_name if gpu else run.gpu_type,
                   "gpuMemoryGb": float(gpu.vram_gb) if gpu else 0.0,
                   # Lanner, on several GPUs only (one GPU: the SDK's exact shape): gpuMemoryGb is each one's
                   **({"gpuCount": run.gpu_count} if run.gpu_count > 1 else {})}
    job = {
        "id": str(run.id),
        "status": wire_status(run.status),
        "progress": {k: v for k, v in {
            "currentEpoch": done, "totalEpochs": total, "startedAt": iso(run.started_at),
            "completedAt": iso(run.completed_at),
            "percentage": round(100.0 * done / total, 2) if total else 0.0}.items() if v is not None},
        "timing": {"elapsedMs": elapsed_ms, "timePerEpochMs": per_epoch,
                   "etaMs": 0.0 if run.status in ("completed", "failed", "cancelled") else per_epoch * remaining},
        "compute": compute,
        "trainArgs": train_args or None,
        "epochMetrics": numeric_metrics(epochs[-1].metrics) if epochs else None,
        "error": run.error,
        "createdAt": iso(run.created_at),
        "updatedAt": iso(run.last_event_at or run.created_at),
    }
    if run.provisioning_since is not None and run.status in WAITING:
        job["provisioning"] = provisioning_view(run)  # Lanner extension, only while it waits for a node
    return job


def provisioning_view(run: Run) -> dict[str, Any]:
    """A run waiting for its pool's node: which pool, since when, how long it usually takes, when it gives up."""
    told = dict((run.launch or {}).get("provisioning") or {})
    return {**told, "since": iso(run.provisioning_since),
            "elapsedSeconds": round(elapsed_seconds(run.provisioning_since, utcnow()), 1)}


def compute_cost_view(session: Session, model: ModelRecord, *, catalogue: Catalogue) -> dict[str, Any]:
    """``computeCost`` and ``cloudJob`` of a model Lanner trained: charged so far (net of refunds), in dollars
    with micro-dollar precision, and the seconds billed; plus the quick-run re-estimate when there is one."""
    extra: dict[str, Any] = {}
    if model.full_run_estimate:
        extra["fullRunEstimate"] = model.full_run_estimate
    run = session.scalar(select(Run).where(Run.model_id == model.id, Run.executor.is_not(None))
                         .order_by(Run.id.desc()).limit(1))
    if run is None or run.gpu_type is None:
        return extra
    display = catalogue.get(run.gpu_type).display_name if run.gpu_type in catalogue else run.gpu_type
    extra["computeCost"] = {
        "gpuType": run.gpu_type, "gpuDisplayName": display,
        "pricePerHour": (run.price_micros_per_hour or 0) / billing.MICROS_PER_DOLLAR,  # for all its GPUs
        "gpuCount": run.gpu_count,
        "totalCost": billing.run_charged(session, run.id) / billing.MICROS_PER_DOLLAR,
        "durationMs": round(billing_seconds(run) * 1000.0, 1),
        "billedSeconds": math.ceil(billing_seconds(run)),
        "settled": run.settled_at is not None,
    }
    extra["cloudJob"] = {"gpuDisplayName": display}
    extra["runHistory"] = run_history(session, run)
    return extra


def run_history(session: Session, run: Run) -> list[dict[str, Any]]:
    """Every status change of the run, with its reason (Lanner extension): lost attempts and relaunches show."""
    events = session.scalars(select(RunEvent).where(RunEvent.run_id == run.id).order_by(RunEvent.id))
    return [{"from": e.from_status, "to": e.to_status, "reason": e.reason, "at": iso(e.created_at)} for e in events]


def train_results(session: Session, model_id: str) -> list[dict[str, Any]]:
    rows = session.scalars(select(EpochMetric).where(EpochMetric.model_id == model_id).order_by(EpochMetric.epoch))
    results = []
    for row in rows:
        item: dict[str, Any] = {"epoch": row.epoch, "metrics": numeric_metrics(row.metrics),
                                "timestamp": iso(row.created_at)}
        if row.fitness is not None:
            item["fitness"] = row.fitness
        results.append(item)
    return results


def console_chunks(session: Session, model_id: str) -> list[dict[str, Any]]:
    rows = session.scalars(select(ConsoleChunk).where(ConsoleChunk.model_id == model_id)
                           .order_by(ConsoleChunk.chunk_id))
    return [{"chunkId": float(r.chunk_id), "content": r.content, "lineCount": float(r.line_count),
             "timestamp": iso(r.created_at)} for r in rows]


def epoch_counts(session: Session, model_ids: list[str]) -> Mapping[str, int]:
    return dict(session.execute(
        select(EpochMetric.model_id, func.count()).where(EpochMetric.model_id.in_(model_ids))
        .group_by(EpochMetric.model_id)
    ).all())


def model_details(session: Session, model: ModelRecord, *, catalogue: Catalogue) -> dict[str, Any]:
    """The training fields of ``models.retrieve``."""
    return {"trainResults": train_results(session, model.id), "consoleChunks": console_chunks(session, model.id),
            **compute_cost_view(session, model, catalogue=catalogue)}


def model_hooks(catalogue: Catalogue) -> ModelHooks:
    """Training's part of the projects API, for ``create_app`` to hand to projects."""
    return ModelHooks(epoch_counts=epoch_counts, details=functools.partial(model_details, catalogue=catalogue),
                      check_delete=ensure_no_unsettled_runs)
