"""What the web pages show of training: one row per model for a project's runs table, a model's live state
(status, timing, cost so far and projected, metric curves, console tail, system metrics) and the curves of
several models for comparing them. Built on the same views as the API (``views.job_view``, ``run_history``,
billing's ``run_charged``), so a page shows what the API would show the same user."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, func, literal, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.billing import service as billing
from lanner.billing.metering import charge_for
from lanner.db import utcnow
from lanner.gpus.catalogue import Catalogue
from lanner.projects.models import ModelRecord
from lanner.training import views
from lanner.training.models import ConsoleChunk, EpochMetric, Run, SystemMetric
from lanner.training.service import latest_run, latest_runs
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
    projected = charged + (charge_for(eta_seconds, run.price_micros_per_hour, run.gpu_count)
                           if run.status in ACTIVE else 0)
    return charged, projected


# The box mAP50-95 key: what ``_metric(metrics, CURVES["map"])`` picks whenever it holds a number, since no other
# key the trainer sends starts with "metrics/mAP50-95" and ends with "(B)" (masks and keypoints end "(M)", "(P)").
BOX_MAP_KEY = "metrics/mAP50-95(B)"
IN_CHUNK = 500  # ids per IN list


@dataclass
class RunFacts:
    """What a project's runs table shows of its models' latest runs, fetched for all of them with a few queries
    (``model_row`` asked some five per model: a 1,000-run project made 5,000)."""

    runs: dict[str, Run]              # model id -> latest run
    epochs_done: dict[int, int]       # run id -> its last epoch + 1 (what job_view's currentEpoch counts)
    charged: dict[int, int]           # run id -> net charges, for runs with a price (``billing.run_charged``)
    best_maps: dict[str, float | None]  # model id -> the best of curves()'s "map" column (None: no value)
    starters: dict[str, User]         # user id -> the user who started one of the runs

    @classmethod
    def load(cls, session: Session, models: Sequence[ModelRecord]) -> RunFacts:
        runs = latest_runs(session, [m.id for m in models], summary=True)  # a row reads none of a run's JSON
        best_maps, done = _epoch_facts(session, models, runs)
        priced = [r.id for r in runs.values() if r.price_micros_per_hour is not None]
        starter_ids = sorted({r.started_by_id for r in runs.values() if r.started_by_id})
        starters = {u.id: u for start in range(0, len(starter_ids), IN_CHUNK) for u in session.scalars(
            select(User).where(User.id.in_(starter_ids[start:start + IN_CHUNK])))}
        return cls(runs=runs, epochs_done=done, charged=billing.runs_charged(session, priced),
                   best_maps=best_maps, starters=starters)


# What a model's epochs give its row (best mAP, epochs of its latest run), by (model id, the model's updated_at,
# its latest run). Epochs are written only together with their model's metrics and updated_at
# (``writes.PendingWrites.add_epoch``, one transaction) and removed only with their model, so while a model's
# updated_at is unchanged so are its epochs. Reading them extracts a value from every epoch's metrics (1,000
# models of ~40 epochs: a tenth of a second), so a runs table reads only the models that changed since it was
# last shown.
_EPOCH_FACTS: OrderedDict[tuple[str, Any, int | None], tuple[float | None, int | None]] = OrderedDict()
_EPOCH_FACTS_LOCK = threading.Lock()
EPOCH_FACTS_REMEMBERED = 20_000


def _epoch_facts(session: Session, models: Sequence[ModelRecord],
                 runs: dict[str, Run]) -> tuple[dict[str, float | None], dict[int, int]]:
    """(model id -> best of curves()'s "map", run id -> its last epoch + 1) for the models and their latest runs."""
    ids = [m.id for m in models]
    stamps: dict[str, Any] = {}  # read now, not from the loaded models: the epoch writer updates them in SQL
    for start in range(0, len(ids), IN_CHUNK):
        stamps.update(session.execute(select(ModelRecord.id, ModelRecord.updated_at)
                                      .where(ModelRecord.id.in_(ids[start:start + IN_CHUNK]))).all())
    best: dict[str, float | None] = {}
    done: dict[int, int] = {}
    stale: dict[str, tuple[str, Any, int | None]] = {}
    with _EPOCH_FACTS_LOCK:
        for model_id, updated_at in stamps.items():
            run = runs.get(model_id)
            key = (model_id, updated_at, run.id if run is not None else None)
            if key in _EPOCH_FACTS:
                best[model_id], last = _EPOCH_FACTS[key]
                if run is not None and last is not None:
                    done[run.id] = last
            else:
                stale[model_id] = key
    if not stale:
        return best, done
    fresh_best = {model_id: max(maps) if maps else None
                  for model_id, maps in _map_curves(session, list(stale)).items()}
    run_ids = [key[2] for key in stale.values() if key[2] is not None]
    fresh_done: dict[int, int] = {}
    for start in range(0, len(run_ids), IN_CHUNK):
        fresh_done.update((run_id, last + 1) for run_id, last in session.execute(
            select(EpochMetric.run_id, func.max(EpochMetric.epoch))
            .where(EpochMetric.run_id.in_(run_ids[start:start + IN_CHUNK])).group_by(EpochMetric.run_id)))
    best.update(fresh_best)
    done.update(fresh_done)
    with _EPOCH_FACTS_LOCK:
        for model_id, key in stale.items():
            _EPOCH_FACTS[key] = (fresh_best[model_id], fresh_done.get(key[2]) if key[2] is not None else None)
        while len(_EPOCH_FACTS) > EPOCH_FACTS_REMEMBERED:
            _EPOCH_FACTS.popitem(last=False)
    return best, done


def _map_curves(session: Session, model_ids: list[str]) -> dict[str, list[float]]:
    """``curves(...)["map"]`` without its Nones, per model, reading one value of each epoch's metrics (the
    database extracts it) instead of every epoch's whole metrics. ``_metric`` returns ``float()`` of that value
    whenever it has one; a model with an epoch where it has none (missing, null, not a number) is read whole
    through ``curves``, so the result is the same."""
    # SQLite answers the value's JSON text (a number exactly as stored), PostgreSQL the value itself.
    box_map = EpochMetric.metrics.op("->", return_type=String)(literal(BOX_MAP_KEY, String))
    maps: dict[str, list[float]] = {model_id: [] for model_id in model_ids}
    whole: set[str] = set()
    for start in range(0, len(model_ids), IN_CHUNK):
        chunk = model_ids[start:start + IN_CHUNK]
        for model_id, value in session.execute(select(EpochMetric.model_id, box_map).where(
                EpochMetric.model_id.in_(chunk)).order_by(EpochMetric.model_id, EpochMetric.epoch)):
            try:
                maps[model_id].append(float(value))
            except (TypeError, ValueError):
                whole.add(model_id)
    for model_id in whole:
        maps[model_id] = [v for v in curves(session, model_id)["map"] if v is not None]
    return maps


def model_rows(session: Session, models: Sequence[ModelRecord], *, catalogue: Catalogue) -> list[dict[str, Any]]:
    """``model_row`` of every model, in order, with the same few queries however many there are."""
    facts = RunFacts.load(session, models)
    return [model_row(session, model, catalogue=catalogue, facts=facts) for model in models]


def model_row(session: Session, model: ModelRecord, *, catalogue: Catalogue,
              facts: RunFacts | None = None) -> dict[str, Any]:
    """A project table's row: status, GPU, epochs done/total, duration, cost, best mAP50-95, who started it.
    The figures are ``views.job_view``'s, the cost ``billing.run_charged``, the mAP the best of ``curves``;
    ``facts`` (``RunFacts.load`` of many models) saves the queries."""
    facts = facts or RunFacts.load(session, [model])
    run = facts.runs.get(model.id)
    progress: dict[str, Any] = {}
    timing: dict[str, Any] = {}
    gpu = None
    if run is not None:  # job_view's progress, timing and GPU name
        progress = {"currentEpoch": float(facts.epochs_done.get(run.id, 0)),
                    "totalEpochs": float(run.epochs or model.epochs or 0)}
        end = run.completed_at or utcnow()
        timing = {"elapsedMs": max(0.0, (end - (run.started_at or run.created_at)).total_seconds() * 1000)}
        if run.gpu_type:
            known = catalogue.get(run.gpu_type) if run.gpu_type in catalogue else None
            gpu = known.display_name if known else run.gpu_type
    charged = facts.charged.get(run.id, 0) if run is not None and run.price_micros_per_hour is not None else None
    gpu = gpu or (run.device if run else None)
    started_by = None
    if run is not None:
        starter = facts.starters.get(run.started_by_id) if run.started_by_id else None
        who = starter.username if starter is not None else "a removed user"
        started_by = f"{who} on Lanner ({run.executor})" if run.executor else f"{who} with their own trainer"
    return {"name": model.name, "slug": model.slug, "status": model.status, "gpu": gpu or "",
            "epochs_done": int(progress.get("currentEpoch", 0)), "epochs_total": int(progress.get("totalEpochs", 0)
                                                                                    or model.epochs or 0),
            "duration_s": round(timing.get("elapsedMs", 0.0) / 1000) if run else None,
            "cost_micros": charged, "best_map": facts.best_maps.get(model.id), "started_by": started_by,
            "created_at": model.created_at}


def system_latest(session: Session, run: Run | None) -> dict[str, Any]:
    """The run's latest system reading, flattened one level (``gpus.0.memory``), numbers only."""
    if run is None:
        return {}
    # Readings come as system_metrics events and inside epoch_end events (kept in the epoch row): the newer wins.
    readings = [session.execute(select(SystemMetric.data, SystemMetric.created_at).where(SystemMetric.run_id == run.id)
                                .order_by(SystemMetric.id.desc()).limit(1)).first(),
                session.execute(select(EpochMetric.system, EpochMetric.created_at).where(EpochMetric.run_id == run.id)
                                .order_by(EpochMetric.id.desc()).limit(1)).first()]
    latest = max((r for r in readings if r is not None and isinstance(r[0], dict)), key=lambda r: r[1], default=None)
    flat: dict[str, Any] = {}
    for key, value in (latest[0] if latest else {}).items():
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
    waiting = job.get("provisioning")
    return {
        # The page may say what the wire cannot: a run waiting for its pool's node is provisioning, not pending.
        "status": "provisioning" if waiting else model.status, "active": run is not None and run.status in ACTIVE,
        "waiting": waiting,
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


PLOT_TITLES = {"pr_curve": ("Precision–recall", "Recall"), "f1_curve": ("F1–confidence", "Confidence"),
               "p_curve": ("Precision–confidence", "Confidence"), "r_curve": ("Recall–confidence", "Confidence")}
PLOT_CLASSES = 10  # per-class lines drawn besides "all classes"; more would be unreadable
MATRIX_CLASSES = 50  # a larger confusion matrix is left to the downloaded weights' own plots


def final_plots(plots: list[Any] | None, class_names: list[Any] | None) -> list[dict[str, Any]]:
    """The trainer's final plots (``training_complete.plots``) as the model page draws them: curves as one x
    column and named y series (the per-class rows the trainer sends, plus their mean as "all classes"), and the
    confusion matrix as labelled rows. Anything malformed is skipped: these come from the trainer, not us."""
    out: list[dict[str, Any]] = []
    plots = [p for p in plots or [] if isinstance(p, dict)]
    # The trainer names the classes on its PR curve only; the model's own class list is the fallback.
    named = next((p["classes"] for p in plots if isinstance(p.get("classes"), list)), None)
    names = [str(n) for n in (named or class_names or [])]
    for plot in plots:
        kind = str(plot.get("type") or "")
        if kind == "confusion_matrix":
            matrix = _matrix(plot.get("matrix"))
            if matrix:
                fits = len(names) + 1 == len(matrix)
                labels = names + ["background"] if fits else [str(i) for i in range(len(matrix))]
                out.append({"kind": "matrix", "title": "Confusion matrix", "labels": labels, "rows": matrix,
                            "max": max(max(row) for row in matrix) or 1})
            continue
        curve = _curve(plot.get("x"), plot.get("y"))
        if curve is None:
            continue
        x, rows = curve
        title, x_label = PLOT_TITLES.get(kind, (kind.replace("_", " ").capitalize() or "Plot", "x"))
        mean = [round(sum(col) / len(col), 5) for col in zip(*rows, strict=True)]
        series = [{"label": "all classes", "y": mean}]
        if len(rows) > 1:
            series += [{"label": names[i] if i < len(names) else f"class {i}", "y": row}
                       for i, row in enumerate(rows[:PLOT_CLASSES])]
        out.append({"kind": "curve", "type": kind, "title": title, "xLabel": x_label, "x": x, "series": series})
    return out


def _numbers(values: Any) -> list[float] | None:
    if not isinstance(values, list) or not values:
        return None
    numbers = [_number(v) for v in values]
    return None if any(v is None for v in numbers) else [round(v, 5) for v in numbers if v is not None]


def _curve(x: Any, y: Any) -> tuple[list[float], list[list[float]]] | None:
    xs = _numbers(x)
    if xs is None or not isinstance(y, list) or not y:
        return None
    rows = [_numbers(row) for row in y] if isinstance(y[0], list) else [_numbers(y)]
    if any(row is None or len(row) != len(xs) for row in rows):
        return None
    return xs, [row for row in rows if row is not None]


def _matrix(value: Any) -> list[list[float]] | None:
    if not isinstance(value, list) or not 0 < len(value) <= MATRIX_CLASSES + 1:
        return None
    rows = [_numbers(row) for row in value]
    if any(row is None or len(row) != len(value) for row in rows):
        return None
    return [row for row in rows if row is not None]
