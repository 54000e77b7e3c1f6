"""The training protocol: what the official trainer sends to ``/api/webhooks/training/metrics``, applied to runs
and models. Every handler is safe to repeat. Hot events (epochs, console, system metrics) only queue rows for the
group commit (``writes.py``); the others change runs and models through the ORM and ``state.py``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.bounds import INT32_MAX
from lanner.db import iso, utcnow
from lanner.errors import Conflict, Forbidden, NotFound, Unprocessable
from lanner.gpus.catalogue import Catalogue
from lanner.http.handlers import describe_errors
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord, Project
from lanner.training import checkpoints, console, service
from lanner.training.learn import learn_from
from lanner.training.models import Run
from lanner.training.schemas import (
    CheckpointSavedData,
    ConsoleData,
    EpochEndData,
    MetricsEvent,
    TrainingCompleteData,
    TrainingFailedData,
)
from lanner.training.state import ACTIVE, RunStatus, create_run, transition, try_transition
from lanner.training.writes import HOT_EVENTS, BatchState, RunRef, has_validation_losses

DUPLICATE_START_WINDOW = timedelta(minutes=10)
# Why a run was cancelled by Lanner or its user; the trainer is told to stop in its next webhook response.
STOP_REASONS = frozenset({"cancelled_by_user", "budget_reached", "credit_exhausted"})


def parse(model: type[BaseModel], data: dict[str, Any], event: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Unprocessable(f"{event}: {describe_errors(exc.errors(), limit=1, within='data')}") from None


class EventContext:
    """What a handler needs besides the session; ``batch`` is shared by the events of one transaction."""

    def __init__(self, session: Session, principal: Principal, public_url: str, catalogue: Catalogue,
                 batch: BatchState | None = None) -> None:
        self.session = session
        self.principal = principal
        self.public_url = public_url
        self.catalogue = catalogue  # a completed run's calibration point reads its GPU's memory size
        self.batch = batch or BatchState()


def _check_writable(ctx: EventContext, model_id: str) -> None:
    if ctx.batch.lookups.owner(ctx.session, model_id) != ctx.principal.user_id:
        service.writable_model(ctx.session, ctx.principal, model_id)  # raises the right 404 or 403
    if ctx.principal.run_id is not None:
        scoped = ctx.batch.lookups.run_by_id(ctx.session, ctx.principal.run_id)
        if scoped is None or scoped.model_id != model_id:
            raise Forbidden("this worker key may only report for its own run")


def _run_ref(ctx: EventContext, model_id: str, run_id: Any) -> RunRef:
    lookups = ctx.batch.lookups
    if run_id is not None:
        if (isinstance(run_id, bool) or not isinstance(run_id, int | str) or not str(run_id).isdigit()
                or int(run_id) > INT32_MAX):
            raise Unprocessable(f"data.runId must be an integer from 1 to {INT32_MAX}")
        run = lookups.run_by_id(ctx.session, int(run_id))
        if run is None or run.model_id != model_id:
            raise NotFound(f"run {run_id} not found for this model")
        return run
    run = lookups.latest_run(ctx.session, model_id)
    if run is None:
        raise Conflict("this model has no training run: send training_started first")
    return run


def _orm_run(session: Session, ref: RunRef) -> Run:
    run = session.get(Run, ref.id)
    assert run is not None
    return run


def _orm_model(session: Session, model_id: str) -> ModelRecord:
    model = session.get(ModelRecord, model_id)
    assert model is not None
    return model


def handle_event(ctx: EventContext, body: MetricsEvent) -> dict[str, Any]:
    """Apply one event. Hot events only queue rows on ``ctx.batch``; the caller must ``ctx.batch.finish()``."""
    if body.event not in HOT_EVENTS:
        ctx.batch.before_state_change(ctx.session)
    if body.event == "training_started":
        return _training_started(ctx, body)
    if body.modelId:
        model_id = body.modelId
        _check_writable(ctx, model_id)
    else:
        model_id = service.model_by_name(ctx.session, ctx.principal, body.project, body.name).id
    run = _run_ref(ctx, model_id, body.data.get("runId"))
    HANDLERS[body.event](ctx, model_id, run, body.data)
    ctx.batch.writes.heard(run)
    response: dict[str, Any] = {"received": True, "event": body.event, "modelId": model_id, "runId": run.id}
    if run.status == RunStatus.CANCELLED and run.termination_reason in STOP_REASONS:
        response["cancelled"] = True
    return response


def _fingerprint(body: MetricsEvent) -> str:
    canonical = json.dumps({"project": body.project, "name": body.name, "modelId": body.modelId, "data": body.data},
                           sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _started_response(ctx: EventContext, model: ModelRecord, run: Run, *, cancelled: bool = False) -> dict[str, Any]:
    project = ctx.session.get(Project, model.project_id)
    assert project is not None
    response: dict[str, Any] = {
        "received": True,
        "event": "training_started",
        "mode": "remote",
        "modelId": model.id,
        "runId": run.id,
        "modelSlug": model.slug,
        "modelUrl": service.model_url(ctx.public_url, ctx.principal.username, project.slug, model.slug),
    }
    if cancelled:
        response["cancelled"] = True
    return response


def _device(data: dict[str, Any]) -> str:
    """The trainer's device string ("cuda:0", "cpu"), shown as sent: cut to its column's width, not refused."""
    return str(data.get("device") or "")[:100]


def _training_started(ctx: EventContext, body: MetricsEvent) -> dict[str, Any]:
    session, data = ctx.session, body.data
    fingerprint = _fingerprint(body)
    # A retried training_started (the response was lost) must not create a second model.
    duplicate = session.scalar(select(Run).where(
        Run.start_fingerprint == fingerprint,
        Run.status == RunStatus.STARTING.value,
        Run.created_at >= utcnow() - DUPLICATE_START_WINDOW,
    ).order_by(Run.id.desc()).limit(1))
    if duplicate is not None:
        model = session.get(ModelRecord, duplicate.model_id)
        if model is not None and model.owner_id == ctx.principal.user_id:
            return _started_response(ctx, model, duplicate)

    epochs = data.get("epochs")
    if epochs is not None and (not isinstance(epochs, int) or isinstance(epochs, bool) or not 0 <= epochs <= INT32_MAX):
        raise Unprocessable(f"training_started: data.epochs must be an integer from 0 to {INT32_MAX}")
    train_args = data.get("trainArgs")
    if train_args is not None and not isinstance(train_args, dict):
        raise Unprocessable("training_started: data.trainArgs must be an object")

    if ctx.principal.run_id is not None:
        return _managed_run_started(ctx, body, fingerprint)
    if body.modelId:
        model = service.writable_model(session, ctx.principal, body.modelId)
        previous = service.latest_run(session, model.id)
        if previous is not None and previous.status == RunStatus.CANCELLED:
            # The user stopped this model; a resume of it is told so and tracks as a new model.
            return _started_response(ctx, model, previous, cancelled=True)
        if previous is not None and previous.status in ACTIVE:
            try_transition(session, previous, RunStatus.FAILED, reason="superseded_by_resume")
    else:
        if not body.project:
            raise Unprocessable("training_started: 'project' (owner/slug) is required")
        project = service.resolve_project_for_start(session, ctx.principal, body.project)
        name = body.name or "train"
        model = projects_service.create_model(session, project, name=name, unique=True)

    environment = data.get("environment") if isinstance(data.get("environment"), dict) else None
    run = create_run(session, model, status=RunStatus.STARTING, reason="training_started", epochs=epochs,
                     device=_device(data), train_args=train_args, environment=environment,
                     start_fingerprint=fingerprint, last_event_at=utcnow(), started_by_id=ctx.principal.user_id)
    model.train_args = train_args or model.train_args
    model.epochs = epochs if epochs is not None else model.epochs
    model.environment = environment or model.environment
    model.started_at = model.started_at or utcnow()
    model.completed_at = None
    model.training_error = None
    if train_args:
        task = train_args.get("task")
        model.task = task if task in projects_service.TASKS else model.task
        model.base_model = str(train_args.get("model") or "")[:300] or model.base_model  # the column's width
    if isinstance(data.get("modelInfo"), dict):
        model.model_info = data["modelInfo"]
    session.flush()
    return _started_response(ctx, model, run)


def _managed_run_started(ctx: EventContext, body: MetricsEvent, fingerprint: str) -> dict[str, Any]:
    """A worker Lanner launched reports in with its run-scoped key: the first start and every resumed attempt
    join the same run and model, whatever project/name the trainer derived, so history stays one piece."""
    session, data = ctx.session, body.data
    run = session.get(Run, ctx.principal.run_id)
    if run is None:
        raise NotFound("the run of this worker key no longer exists")
    model = _orm_model(session, run.model_id)
    if body.modelId and body.modelId != model.id:
        raise Forbidden("this worker key may only report for its own run")
    if run.status == RunStatus.CANCELLED:
        return _started_response(ctx, model, run, cancelled=True)
    if run.status not in (RunStatus.STARTING, RunStatus.RUNNING):
        raise Conflict(f"run {run.id} is {run.status}: it cannot start now")
    if isinstance(data.get("environment"), dict):
        run.environment = model.environment = data["environment"]
    if isinstance(data.get("trainArgs"), dict):
        run.train_args = data["trainArgs"]
    run.device = _device(data) or run.device or ""
    run.start_fingerprint = fingerprint
    run.last_event_at = utcnow()
    # When this attempt's trainer was ready: a one-epoch quick run's only epoch is timed from here.
    run.launch = {**(run.launch or {}), "trainerStartedAt": run.last_event_at.isoformat()}
    model.started_at = model.started_at or utcnow()
    session.flush()
    return _started_response(ctx, model, run)


def _mark_running(session: Session, run: RunRef) -> None:
    if run.status == RunStatus.STARTING:
        orm_run = _orm_run(session, run)
        try_transition(session, orm_run, RunStatus.RUNNING, reason="first report")
        run.status = orm_run.status


def is_final_evaluation(ctx: EventContext, model_id: str, run: RunRef, parsed: EpochEndData) -> bool:
    """The trainer re-sends ``epoch_end`` once more after training (``final_eval``) with the best weights'
    validation at index ``last epoch + 1``. It is a result, not an epoch: it must not enter the history.
    Recognised by its index past the planned epochs, or (after an early stop) by the validation losses that
    only the in-training validation reports."""
    if run.epochs is not None and parsed.epoch >= run.epochs:
        return True
    if has_validation_losses(parsed.metrics):
        return False
    pending = [row["metrics"] for row in ctx.batch.writes.epochs
               if row["model_id"] == model_id and row["epoch"] == parsed.epoch - 1]
    previous = pending[-1] if pending else ctx.batch.lookups.stored_metrics(ctx.session, model_id, parsed.epoch - 1)
    return has_validation_losses(previous)


def _epoch_end(ctx: EventContext, model_id: str, run: RunRef, data: dict[str, Any]) -> None:
    parsed: EpochEndData = parse(EpochEndData, data, "epoch_end")
    writes = ctx.batch.writes
    if is_final_evaluation(ctx, model_id, run, parsed):
        final = dict(parsed.metrics)
        if parsed.fitness is not None:
            final["fitness"] = parsed.fitness
        writes.set_model_metrics(model_id, final, None)
        return
    writes.add_epoch(model_id=model_id, run_id=run.id, epoch=parsed.epoch, metrics=parsed.metrics,
                     fitness=parsed.fitness, best_fitness=parsed.best_fitness, system=parsed.system)
    _mark_running(ctx.session, run)
    changes: dict[str, Any] = {}
    if parsed.modelInfo:
        changes["model_info"] = parsed.modelInfo
    total = parsed.total_epochs or parsed.epochs_total
    if total:
        changes["epochs"] = total
    if changes:
        ctx.session.execute(update(ModelRecord).where(ModelRecord.id == model_id).values(**changes)
                            .execution_options(synchronize_session=False))


def _console_output(ctx: EventContext, model_id: str, run: RunRef, data: dict[str, Any]) -> None:
    parsed: ConsoleData = parse(ConsoleData, data, "console_output")
    ctx.batch.writes.add_console(model_id=model_id, run_id=run.id, chunk_id=parsed.chunkId,
                                 content=console.plain(parsed.content), line_count=parsed.lineCount)
    _mark_running(ctx.session, run)


def _system_metrics(ctx: EventContext, model_id: str, run: RunRef, data: dict[str, Any]) -> None:
    ctx.batch.writes.add_system(run_id=run.id, data=data)


def _training_progress(ctx: EventContext, model_id: str, run: RunRef, data: dict[str, Any]) -> None:
    _mark_running(ctx.session, run)


def _checkpoint_saved(ctx: EventContext, model_id: str, run: RunRef, data: dict[str, Any]) -> None:
    parsed: CheckpointSavedData = parse(CheckpointSavedData, data, "checkpoint_saved")
    checkpoints.promote_checkpoint(ctx.session, _orm_model(ctx.session, model_id), parsed.modelPath, run.id)


def _training_complete(ctx: EventContext, model_id: str, ref: RunRef, data: dict[str, Any]) -> None:
    parsed: TrainingCompleteData = parse(TrainingCompleteData, data, "training_complete")
    model, run = _orm_model(ctx.session, model_id), _orm_run(ctx.session, ref)
    results = parsed.results
    metrics = results.get("metrics")
    if isinstance(metrics, dict):
        model.metrics = metrics
    if isinstance(results.get("bestEpoch"), int):
        model.best_epoch = results["bestEpoch"]
    if isinstance(results.get("bestFitness"), int | float):
        model.best_fitness = float(results["bestFitness"])
    if parsed.classNames is not None:
        model.class_names = [str(n) for n in parsed.classNames]
    if parsed.plots is not None:
        model.plots = parsed.plots
    model.results = results
    model_path = results.get("modelPath")
    if isinstance(model_path, str) and model_path:
        checkpoints.promote_if_uploaded(ctx.session, model, model_path, run.id)
    if run.status in (RunStatus.STARTING, RunStatus.RUNNING):
        transition(ctx.session, run, RunStatus.COMPLETED, reason="training_complete")
        learn_from(ctx.session, model, run, catalogue=ctx.catalogue)
    model.completed_at = model.completed_at or utcnow()


def _training_failed(ctx: EventContext, model_id: str, ref: RunRef, data: dict[str, Any]) -> None:
    parsed: TrainingFailedData = parse(TrainingFailedData, data, "training_failed")
    model, run = _orm_model(ctx.session, model_id), _orm_run(ctx.session, ref)
    error = {"message": parsed.error or "training failed", "timestamp": iso(utcnow())}
    if parsed.code:
        error["code"] = parsed.code
    if run.status in ACTIVE:
        run.error = error
        model.training_error = error
        transition(ctx.session, run, RunStatus.FAILED, reason=parsed.code or "training_failed")


HANDLERS: dict[str, Callable[[EventContext, str, RunRef, dict[str, Any]], None]] = {
    "epoch_end": _epoch_end,
    "console_output": _console_output,
    "system_metrics": _system_metrics,
    "training_progress": _training_progress,
    "checkpoint_saved": _checkpoint_saved,
    "training_complete": _training_complete,
    "training_failed": _training_failed,
}
