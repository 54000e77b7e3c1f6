"""Quick test runs: a few epochs on a fraction of the data, whose measured speed re-estimates the full run.

The estimator predicts both the quick run and the full run; the full-run figures are scaled by how far the
quick run's measured epoch time was from its own prediction. So the correction is this run's, on this GPU,
for this model and data, not an average over other runs."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.billing.metering import cost_micros
from lanner.db import Database
from lanner.gpus.catalogue import Catalogue
from lanner.gpus.estimator import Range, cost_range_cents
from lanner.projects.models import ModelRecord
from lanner.training import launch
from lanner.training.inputs import TrainingInputs
from lanner.training.learn import epoch_timing
from lanner.training.models import Run
from lanner.training.state import RunStatus


def measured_epoch_seconds(session: Session, run: Run) -> tuple[float, bool] | None:
    """The median time between consecutive epochs; with a single epoch, that epoch timed from the moment the
    trainer reported ready (second value True: it includes the first epoch's warm-up, so it overstates)."""
    stamps, median = epoch_timing(session, run)
    if median is not None:
        return median, False
    ready = (run.launch or {}).get("trainerStartedAt")
    if len(stamps) == 1 and stamps[0].epoch == 0 and ready:
        seconds = (stamps[0].created_at - datetime.fromisoformat(ready)).total_seconds()
        return (seconds, True) if seconds > 0 else None
    return None


def _scaled(value: dict[str, float], ratio: float, digits: int = 1) -> dict[str, float]:
    return {key: round(number * ratio, digits) for key, number in value.items()}


def _resolved(session: Session, run: Run, model: ModelRecord) -> tuple[Principal, TrainingInputs, dict[str, Any]]:
    """(the payer, what the run's arguments name resolved as ``training.start`` resolves them, the arguments)."""
    user = session.get(User, model.owner_id)
    assert user is not None
    principal = Principal.of(user)
    args = dict((run.launch or {}).get("trainArgs") or {})
    return principal, launch.resolve(session, principal, args), args


def prepare_estimate(db: Database, run_id: int) -> None:
    """A completed quick run's model profiled before the transaction that settles it (``estimate_full_run`` then
    finds it remembered), so a model this process has not seen (seconds) holds no lock. Best effort: what fails
    here fails again in ``estimate_full_run``, where settlement logs it."""
    with db.session() as session:
        run = session.get(Run, run_id)
        model = session.get(ModelRecord, run.model_id) if run is not None else None
        if (run is None or model is None or not run.smoke or run.status != RunStatus.COMPLETED
                or measured_epoch_seconds(session, run) is None):
            return
        try:
            _, resolved, args = _resolved(session, run, model)
        except Exception:
            return
    resolved.profile(args)


def estimate_full_run(session: Session, run: Run, model: ModelRecord, *, catalogue: Catalogue) -> dict[str, Any] | None:
    """The full run's time and cost, corrected by how fast this quick run really was; None without timings."""
    timing = measured_epoch_seconds(session, run)
    launch_args = run.launch or {}
    if timing is None or not launch_args.get("trainArgs") or run.gpu_type is None:
        return None
    measured, first_epoch_only = timing
    principal, resolved, args = _resolved(session, run, model)
    gpu = catalogue.get(run.gpu_type)
    quick = launch.run_estimate(session, catalogue, principal, resolved, args, gpu, run.gpu_count)
    full_args = {**args, "fraction": 1.0, "epochs": int(launch_args.get("fullRunEpochs") or 100)}
    full = launch.run_estimate(session, catalogue, principal, resolved, full_args, gpu, run.gpu_count)
    predicted = float(quick["epochSeconds"]["value"]) or measured
    ratio = measured / predicted
    # Only the epochs run at the measured speed; start-up and final validation stay as estimated.
    epochs = full_args["epochs"]
    total = {key: round(full["totalSeconds"][key] + (ratio - 1.0) * epochs * full["epochSeconds"][key], 1)
             for key in ("value", "low", "high")}
    epoch_seconds = _scaled(full["epochSeconds"], ratio)
    if first_epoch_only:
        # One epoch also carries the warm-up (data loader start, first batches): later epochs run faster.
        # How much is not measured here; the band is widened down by an assumed quarter to say so.
        epoch_seconds["low"] = round(min(epoch_seconds["low"], 0.75 * epoch_seconds["value"]), 1)
        total["low"] = round(min(total["low"], total["value"] - 0.25 * epochs * epoch_seconds["value"]), 1)
    return {
        "gpuType": gpu.id,
        "gpuCount": run.gpu_count,
        "epochs": full_args["epochs"],
        "fromRunId": run.id,
        "measuredEpochSeconds": round(measured, 2),
        "predictedQuickEpochSeconds": round(predicted, 2),
        "correction": round(ratio, 3),
        "basis": "first epoch only (includes warm-up)" if first_epoch_only else "consecutive epochs",
        "epochSeconds": epoch_seconds,
        "totalSeconds": total,
        "costCents": cost_range_cents(Range(**total), gpu.price_per_hour,
                                      functools.partial(cost_micros, devices=run.gpu_count)).as_dict(0),
    }
