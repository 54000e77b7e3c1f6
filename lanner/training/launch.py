"""``training.start``: check everything a paid run needs before a cent is held, then queue it.

Order matters: arguments, dataset and base model (resolved as the estimate resolves them, ``training.inputs``),
GPU type and tier, the estimate (does the batch fit, what will it cost), and only then the credit hold, in the
same transaction as the run, so a refused start leaves nothing behind and concurrent starts cannot spend the same
credit (``billing.place_hold`` locks the account). ``prepare`` profiles the model before that transaction."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.billing import service as billing
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset
from lanner.errors import BadRequest, Conflict, Forbidden, LannerError, Unprocessable
from lanner.gpus.catalogue import Catalogue, GpuType
from lanner.integrations import pixels as bucket_pixels
from lanner.projects.models import Project
from lanner.teams import permissions
from lanner.training import budgets, inputs, service
from lanner.training.executors import Executor
from lanner.training.inputs import TrainingInputs
from lanner.training.models import Run
from lanner.training.schemas import StartRequest
from lanner.training.state import ACTIVE, RunStatus, create_run

# Chosen by Lanner for each attempt; a caller's value would point the trainer at the wrong place.
SERVER_OWNED_ARGS = frozenset({"device", "project", "name", "exist_ok", "save_dir", "resume", "mode"})
QUICK_RUN_MAX_EPOCHS = 5
DEFAULT_FULL_EPOCHS = 100


def validate_train_args(raw: dict[str, Any]) -> dict[str, Any]:
    """The trainer's own check of names and types (422 naming the argument), minus what Lanner decides."""
    from ultralytics.cfg import DEFAULT_CFG_DICT, check_cfg  # ultralytics: seconds to import, loaded on first use

    args: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in DEFAULT_CFG_DICT:
            raise Unprocessable(f"trainArgs.{key}: not an argument of yolo train")
        if key in SERVER_OWNED_ARGS or value is None:
            continue
        if key == "cache" and isinstance(value, str) and value.lower() in ("false", "true"):
            value = value.lower() == "true"  # `ul cloud train` sends cache=false as a string
        args[key] = value
    try:
        check_cfg(args)
    except (TypeError, ValueError) as exc:
        message = str(exc)
        key = message.split("=", 1)[0].strip("'\" ") if "=" in message else "trainArgs"
        raise Unprocessable(f"trainArgs.{key}: {message}") from None
    for key in ("epochs", "imgsz"):
        if key in args and not isinstance(args[key], list) and float(args[key]) <= 0:
            raise Unprocessable(f"trainArgs.{key}: must be positive")
    return args


# ``training.start``'s refusals of what trainArgs name (``inputs.Unresolved``), in its own words and status codes.
WORDS: dict[tuple[str, str], tuple[type[LannerError], str]] = {
    ("data", "shape"): (Unprocessable, "trainArgs.data: must be a Lanner dataset, ul://owner/datasets/slug"),
    ("data", "missing"): (Unprocessable, "trainArgs.data: dataset '{name}' not found"),
    ("data", "not_ready"): (Conflict, "trainArgs.data: dataset '{name}' is {status}, not ready"),
    ("data", "empty"): (Unprocessable, "trainArgs.data: dataset '{name}' has no training images"),
    ("model", "shape"): (Unprocessable, "trainArgs.model: must look like ul://owner/project/model"),
    ("model", "missing"): (Unprocessable, "trainArgs.model: model '{name}' not found"),
    ("model", "not_installed"): (Unprocessable, "trainArgs.model: {detail}"),
    ("model", "no_weights"): (Unprocessable, "trainArgs.model: model '{name}' has no weights to start from"),
    ("model", "name"): (Unprocessable, "trainArgs.model: a model YAML or weights name (yolo11n.yaml), "
                                       "or ul://owner/project/model"),
}


def resolve(session: Session, principal: Principal, args: dict[str, Any]) -> TrainingInputs:
    """The dataset and base model ``args`` (validated trainer arguments) name, as a run will train on them."""
    try:
        return inputs.resolve(session, principal, model=args.get("model"), data=str(args.get("data") or ""),
                              to_train=True)
    except inputs.Unresolved as exc:
        raise inputs.refusal(exc, WORDS) from None


def choose_gpu(catalogue: Catalogue, executor: Executor, principal: Principal, wanted: str | None) -> GpuType:
    if wanted is None:
        capacity, pools = executor.capacity(), executor.pools
        candidates = sorted((g for g in catalogue.offered() if g.allowed_for(principal.tier) and (
            (capacity.get(g.id) and capacity[g.id].total) or pools.for_gpu(g.id))), key=lambda g: g.price_per_hour)
        if not candidates:
            raise Unprocessable("gpuType: required (no GPU type has capacity right now)")
        return candidates[0]
    if wanted not in catalogue:
        raise Unprocessable(f"gpuType: unknown GPU type '{wanted}'")
    gpu = catalogue.get(wanted)
    if not gpu.offered:
        raise Unprocessable(f"gpuType: '{wanted}' is not offered on this server")
    if not gpu.allowed_for(principal.tier):
        raise Forbidden(f"gpuType: {gpu.display_name} needs the {gpu.min_tier} tier or higher "
                        f"(your tier: {principal.tier})", code="tier_required", extra={"requiredTier": gpu.min_tier})
    if not executor.offers(wanted):
        offered = sorted(g.id for g in catalogue.offered() if executor.offers(g.id))
        raise Unprocessable(f"gpuType: {gpu.display_name} is not offered: no worker here has one and no pool brings "
                            f"one up (available: {', '.join(offered)})")
    return gpu


def check_gpu_count(executor: Executor, gpu: GpuType, count: int) -> None:
    """A run on ``count`` GPUs of ``gpu``'s type needs them all on one machine: refused when this server's has
    fewer (a Ray pool: its nodes' GPUs; Ray without one knows no limit, a node with more may join)."""
    if count == 1:
        return
    if gpu.multi_gpu_efficiency is None:
        raise Unprocessable(f"gpuCount: {gpu.display_name} trains on one device; give gpuCount 1")
    if not holds(executor, gpu.id, count):
        most = executor.most_devices(gpu.id)
        raise Unprocessable(f"gpuCount: this server has {most} {gpu.display_name} on one machine, not {count}",
                            extra={"gpuCountAvailable": most})


def holds(executor: Executor, gpu_type: str, count: int) -> bool:
    """Whether one machine here can have ``count`` GPUs of the type (unknown, as on Ray without a pool: yes)."""
    most = executor.most_devices(gpu_type)
    return most is None or most >= count


def is_quick_run(args: dict[str, Any]) -> bool:
    """A quick test run: part of the data for a few epochs; its speed re-estimates the full run."""
    fraction = float(args.get("fraction", 1.0) or 1.0)
    return fraction < 1.0 and int(args.get("epochs", DEFAULT_FULL_EPOCHS)) <= QUICK_RUN_MAX_EPOCHS


def run_estimate(session: Session, catalogue: Catalogue, principal: Principal, resolved: TrainingInputs,
                 args: dict[str, Any], gpu: GpuType, gpu_count: int = 1) -> dict[str, Any]:
    """The estimate of one GPU type on ``gpu_count`` of them (an item of the advisor's answer), as ``principal``
    pays."""
    try:
        body = resolved.estimate(session, catalogue, args, tier=principal.tier, gpu_types=[gpu.id],
                                 gpu_count=gpu_count)
    except BadRequest as exc:  # what the estimate endpoint calls a bad request is, in training.start, bad trainArgs
        raise Unprocessable(exc.message) from None
    return body["estimates"][0]


def fallback_types(session: Session, catalogue: Catalogue, payer: Principal, resolved: TrainingInputs,
                   args: dict[str, Any], chosen: GpuType, executor: Executor, hold: int,
                   gpu_count: int = 1) -> list[dict[str, Any]]:
    """Where a run allows it, the GPU types it may move to when no node of ``chosen`` comes up (the hosted
    platform's "fail over to a similar GPU"): those the advisor estimates it fits on, that the payer's tier allows,
    that can run here and whose high cost the run's hold still covers, cheapest first; at most three."""
    candidates = [g.id for g in catalogue.offered() if g.id not in (chosen.id, "cpu")
                  and g.allowed_for(payer.tier) and executor.offers(g.id) and holds(executor, g.id, gpu_count)]
    if not candidates:
        return []
    ranked = sorted(resolved.estimate(session, catalogue, args, tier=payer.tier, gpu_types=candidates,
                                      gpu_count=gpu_count)["estimates"],
                    key=lambda e: e["costCents"]["value"])
    return [{"gpuType": e["gpuType"], "pricePerHour": e["pricePerHour"]} for e in ranked
            if e["fits"] and e["allowed"] and (not hold or hold_micros(e, None) <= hold)][:3]


def hold_micros(estimate: dict[str, Any], max_cost_micros: int | None) -> int:
    """The credit ``start`` holds for a run on the GPU of ``estimate`` (an item of the advisor's answer): the high
    end of its cost in whole cents, nothing on a free GPU, at most the run's cost cap. The train dialog shows
    this figure before launch, so it asks this function rather than repeating the rule."""
    if not billing.dollars_to_micros(estimate["pricePerHour"]):
        return 0
    hold = billing.cents_to_micros(math.ceil(estimate["costCents"]["high"]))
    return hold if max_cost_micros is None else min(hold, max_cost_micros)


def prepare(session: Session, principal: Principal, train_args: dict[str, Any]) -> None:
    """What ``start`` will estimate, profiled before its transaction (``inputs.TrainingInputs.profile``: seconds for
    a model this process has not seen), so the lock ``start`` holds is not held through it: the transaction so
    far (the caller's sign-in) is committed, nothing else is written. Call it before anything to roll back;
    refusals are left to ``start``."""
    session.commit()
    try:
        args = validate_train_args(train_args)  # imports ultralytics on first use: outside the lock too
        resolved = resolve(session, principal, args)
    except LannerError:
        return
    session.commit()
    resolved.profile(args)


def start(session: Session, principal: Principal, body: StartRequest, *, catalogue: Catalogue,
          executor: Executor, executor_name: str) -> dict[str, Any]:
    model = service.writable_model(session, principal, body.modelId)
    project = session.get(Project, model.project_id)
    assert project is not None
    # The workspace pays and its plan decides the GPU types: a team's run is the team's, whoever starts it.
    payer = principal if model.owner_id == principal.user_id else Principal.of(session.get(User, model.owner_id))
    active = session.scalar(select(Run.id).where(Run.model_id == model.id,
                                                 Run.status.in_([s.value for s in ACTIVE])).limit(1))
    if active is not None:
        raise Conflict("this model is already training; cancel it or create a new model")
    args = validate_train_args(body.trainArgs)
    resolved = resolve(session, principal, args)
    assert resolved.dataset is not None
    record = session.get(Dataset, resolved.dataset.id)
    if record is not None:
        bucket_pixels.require_processing(session, record, "cloud training")  # the integration's AI switch
    args["data"], args["model"] = resolved.dataset.uri, resolved.model.trainer
    gpu = choose_gpu(catalogue, executor, payer, body.gpuType)
    check_gpu_count(executor, gpu, body.gpuCount)
    estimate = run_estimate(session, catalogue, payer, resolved, args, gpu, body.gpuCount)
    if not estimate["fits"]:
        split = f" ({estimate['batchPerGpu']} per GPU)" if body.gpuCount > 1 else ""
        raise Unprocessable(f"trainArgs.batch: batch {estimate['batch']}{split} needs {estimate['memoryGb']} GB but "
                            f"{gpu.display_name} has {estimate['vramGb']} GB; the largest batch that fits is "
                            f"{estimate['maxBatch']}")

    price_micros = billing.dollars_to_micros(gpu.price_per_hour) * body.gpuCount  # the run's, for all its GPUs
    estimate_micros = billing.cents_to_micros(estimate["costCents"]["value"])
    max_cost = billing.cents_to_micros(body.maxCostCents) if body.maxCostCents is not None else None
    hold = hold_micros(estimate, max_cost)

    fallback = fallback_types(session, catalogue, payer, resolved, args, gpu, executor, hold,
                              body.gpuCount) if body.allowFallback else []
    version = None
    if body.captureDatasetVersion:
        version = capture_version(session, principal, resolved.dataset)
    quick = is_quick_run(args)
    run = create_run(session, model, status=RunStatus.PENDING, reason="training.start",
                     executor=executor_name, gpu_type=gpu.id, epochs=int(args.get("epochs", DEFAULT_FULL_EPOCHS)),
                     train_args=args, launch={"project": f"{payer.username}/{project.slug}", "name": model.slug,
                                              "trainArgs": args,
                                              "fullRunEpochs": body.fullRunEpochs or DEFAULT_FULL_EPOCHS,
                                              **({"fallback": fallback} if body.allowFallback else {})},
                     estimate=estimate, smoke=quick, dataset_version_id=version["id"] if version else None,
                     price_micros_per_hour=price_micros, hold_micros=hold, max_cost_micros=max_cost,
                     started_by_id=principal.user_id, gpu_count=body.gpuCount)
    if hold:
        budgets.check(session, owner_id=model.owner_id, user_id=principal.user_id, hold_micros=hold)
        billing.place_hold(session, user_id=model.owner_id, run_id=run.id, micros=hold,
                           estimate_micros=estimate_micros, model_id=model.id, gpu_type=gpu.id)
    model.train_args = args
    model.epochs = run.epochs
    model.base_model = str(args["model"])
    model.task = model.task or resolved.dataset.task
    model.completed_at = None
    model.training_error = None
    if version:
        model.metadata_ = {**(model.metadata_ or {}), "datasetVersion": version}
    session.flush()
    balance = billing.balances(session, user_id=model.owner_id)
    return {
        "modelId": model.id,
        "status": "starting",  # the SDK's TrainingStartResponse allows only this; the run is pending (``queued``)
        "gpuType": gpu.id,
        "estimatedCost": {"pricePerHour": price_micros / billing.MICROS_PER_DOLLAR,  # all the run's GPUs
                          "gpuMemoryGb": float(estimate["vramGb"])},
        "billing": {"estimatedCostCents": round(estimate["costCents"]["value"], 4),
                    "estimatedCostDisplay": billing.format_cents(estimate_micros),
                    "balanceCents": billing.micros_to_fractional_cents(balance.available)},
        # Lanner extensions
        "runId": run.id,
        "gpuCount": body.gpuCount,
        "queued": True,
        "smokeRun": quick,
        "holdCents": billing.micros_to_fractional_cents(hold),
        "estimate": {k: estimate[k] for k in ("epochSeconds", "totalSeconds", "costCents", "batch", "memoryGb",
                                              "loaderBound")},
        **({"datasetVersion": version} if version else {}),
    }


def capture_version(session: Session, principal: Principal, dataset: inputs.DatasetRef) -> dict[str, Any]:
    record = session.get(Dataset, dataset.id)
    assert record is not None
    if not permissions.can(session, user_id=principal.user_id, owner_id=record.owner_id, action="write"):
        raise Forbidden("captureDatasetVersion: only those who may change the dataset can save a version of it")
    version, _ = datasets_service.create_version(session, record, description="Captured for a training run")
    return {"id": version.id, "version": version.version}
