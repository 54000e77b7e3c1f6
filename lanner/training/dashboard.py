"""What the web pages show of training: one row per model for a project's runs table, a model's live state
(status, timing, cost so far and projected, metric curves, console tail, system metrics) and the curves of
several models for comparing them. Built on the same views as the API (``views.job_view``, ``run_history``,
billing's ``run_charged``), so a page shows what the API would show the same user."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.billing import service as billing
from lanner.billing.metering import charge_for
from lanner.gpus.catalogue import Catalogue
from lanner.projects.models import ModelRecord
from lanner.training import views
from lanner.training.models import ConsoleChunk, EpochMetric, Run, SystemMetric
from lanner.training.service import latest_run
from lanner.training.state import ACTIVE

CONSOLE_CHUNKS = 200  # the console tail a page shows and streams
# Curves: the first metric key with one of these prefixes, box metrics ("(B)") before masks and others.
CURVES = {"map": "metrics/mAP50-95", "map50": "metrics/mAP50(", "precision": "metrics/precision",
          "recall": "metrics/recall"}


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _metric(metrics: dict[str, Any], prefix: str) -> float | None:
    keys = sorted((k for k in metrics if k.startswith(prefix)), key=lambda k: (not k.endswith("(B)"), k))
    for key in keys:
        value = _number(metrics[key])
        if value is not None:
            return value
    return None


def _loss(metrics: dict[str, Any], split: str) -> float | None:
    values = [_number(v) for k, v in metrics.items() if k.startswith(f"{split}/") and k.endswith("loss")]
    numbers = [v for v in values if v is not None]
    return round(sum(numbers), 6) if numbers else None


def _epochs(session: Session, model_id: str) -> list[EpochMetric]:
    return list(session.scalars(select(EpochMetric).where(EpochMetric.model_id == model_id)
                                .order_by(EpochMetric.epoch)))


def curves(session: Session, model_id: str) -> dict[str, list[Any]]:
    """uPlot columns per epoch (1-based): summed train and val loss, mAP50-95, mAP50, precision, recall."""
    rows = _epochs(session, model_id)
    data: dict[str, list[Any]] = {"x": [r.epoch + 1 for r in rows],
                                  "loss": [_loss(r.metrics, "train") for r in rows],
                                  "val_loss": [_loss(r.metrics, "val") for r in rows]}
    for name, prefix in CURVES.items():
        data[name] = [_metric(r.metrics, prefix) for r in rows]
    return data


def _cost(session: Session, run: Run | None, eta_seconds: float) -> tuple[int | None, int | None]:
    """Charged so far and projected at the end (so far plus the ETA at the run's price): runs Lanner launched."""
    if run is None or run.price_micros_per_hour is None:
        return None, None
    charged = billing.run_charged(session, run.id)
    projected = charged + (charge_for(eta_seconds, run.price_micros_per_hour) if run.status in ACTIVE else 0)
    return charged, projected


def model_row(session: Session, model: ModelRecord, *, catalogue: Catalogue, owner: str) -> dict[str, Any]:
    """A project table's row: status, GPU, epochs done/total, duration, cost, best mAP50-95, who started it."""
    job = views.job_view(session, model, catalogue=catalogue) or {}
    run = latest_run(session, model.id)
    maps = [v for v in curves(session, model.id)["map"] if v is not None]
    progress, timing = job.get("progress", {}), job.get("timing", {})
    charged, _ = _cost(session, run, 0.0)
    gpu = (job.get("compute") or {}).get("gpuDisplayName") or (run.device if run else None)
    started_by = None
    if run is not None:
        started_by = f"{owner} on Lanner ({run.executor})" if run.executor else f"{owner}'s own trainer"
    return {"name": model.name, "slug": model.slug, "status": model.status, "gpu": gpu or "",
            "epochs_done": int(progress.get("currentEpoch", 0)), "epochs_total": int(progress.get("totalEpochs", 0)
                                                                                    or model.epochs or 0),
            "duration_s": round(timing.get("elapsedMs", 0.0) / 1000) if run else None,
            "cost_micros": charged, "best_map": max(maps) if maps else None, "started_by": started_by,
            "created_at": model.created_at}


def system_latest(session: Session, run: Run | None) -> dict[str, Any]:
    """The run's latest system metrics, flattened one level (``gpus.0.memory``), numbers only."""
    if run is None:
        return {}
    row = session.scalar(select(SystemMetric).where(SystemMetric.run_id == run.id)
                         .order_by(SystemMetric.id.desc()).limit(1))
    flat: dict[str, Any] = {}
    for key, value in (row.data if row else {}).items():
        items = value.items() if isinstance(value, dict) else [("", value)]
        for sub, inner in items:
            nested = inner.items() if isinstance(inner, dict) else [("", inner)]
            for leaf, number in nested:
                name = ".".join(str(p) for p in (key, sub, leaf) if p != "")
                if isinstance(number, int | float) and not isinstance(number, bool):
                    flat[name] = round(float(number), 2)
    return dict(list(flat.items())[:24])


def console_tail(session: Session, model_id: str) -> list[dict[str, Any]]:
    rows = list(session.scalars(select(ConsoleChunk).where(ConsoleChunk.model_id == model_id)
                                .order_by(ConsoleChunk.chunk_id.desc()).limit(CONSOLE_CHUNKS)))
    return [{"id": r.chunk_id, "text": r.content} for r in reversed(rows)]


def live_state(session: Session, model: ModelRecord, *, catalogue: Catalogue) -> dict[str, Any]:
    """Everything on a model page that changes while it trains; each change is one event of its live stream."""
    job = views.job_view(session, model, catalogue=catalogue) or {}
    run = latest_run(session, model.id)
    timing, progress = job.get("timing", {}), job.get("progress", {})
    eta = timing.get("etaMs", 0.0) / 1000
    charged, projected = _cost(session, run, eta)
    return {
        "status": model.status, "active": run is not None and run.status in ACTIVE,
        "elapsed_s": round(timing.get("elapsedMs", 0.0) / 1000) if run else 0,
        "eta_s": round(eta) if run is not None and run.status in ACTIVE else None,
        "epochs_done": int(progress.get("currentEpoch", 0)), "epochs_total": int(progress.get("totalEpochs", 0)),
        "cost_micros": charged, "projected_micros": projected,
        "curves": curves(session, model.id), "console": console_tail(session, model.id),
        "system": system_latest(session, run),
        "history": views.run_history(session, run) if run is not None else [],
    }


def compare(session: Session, models: Iterable[ModelRecord]) -> list[dict[str, Any]]:
    """Per model: its name, curves and the training arguments of its latest run (or the model's own)."""
    result = []
    for model in models:
        run = latest_run(session, model.id)
        args = (run.train_args if run is not None else None) or model.train_args or {}
        result.append({"name": model.name, "slug": model.slug, "curves": curves(session, model.id),
                       "args": {str(k): v for k, v in args.items()}})
    return result
