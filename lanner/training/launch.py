"""``training.start``: check everything a paid run needs before a cent is held, then queue it.

Order matters: arguments, dataset and base model, GPU type and tier, the estimate (does the batch fit, what will
it cost), and only then the credit hold, in the same transaction as the run, so a refused start leaves nothing
behind and concurrent starts cannot spend the same credit (``billing.place_hold`` locks the account)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.billing import service as billing
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset
from lanner.errors import BadRequest, Conflict, Forbidden, NotFound, Unprocessable
from lanner.gpus import advisor
from lanner.gpus.catalogue import Catalogue, GpuType
from lanner.projects import official, starting
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord, Project
from lanner.teams import permissions
from lanner.training import budgets, refs
from lanner.training.estimates import advise
from lanner.training.executors import Executor
from lanner.training.models import Run
from lanner.training.schemas import StartRequest
from lanner.training.state import ACTIVE, RunStatus, create_run

# Chosen by Lanner for each attempt; a caller's value would point the trainer at the wrong place.
SERVER_OWNED_ARGS = frozenset({"device", "project", "name", "exist_ok", "save_dir", "resume", "mode"})
QUICK_RUN_MAX_EPOCHS = 5
DEFAULT_FULL_EPOCHS = 100


@dataclass
class DatasetRef:
    id: str
    uri: str
    train: int
    val: int
    nc: int | None
    task: str


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


def resolve_dataset(session: Session, principal: Principal, data: Any) -> DatasetRef:
    uri = str(data or "")
    parts = refs.dataset_parts(uri)
    if parts is None or not all(parts):
        raise Unprocessable("trainArgs.data: must be a Lanner dataset, ul://owner/datasets/slug")
    try:
        dataset = datasets_service.get_dataset(session, principal, owner=parts[0], slug=parts[1])
    except NotFound:
        raise Unprocessable(f"trainArgs.data: dataset '{uri}' not found") from None
    if dataset.status != "ready":
        raise Conflict(f"trainArgs.data: dataset '{uri}' is {dataset.status}, not ready")
    counts = datasets_service.counts(session, dataset.manifest_id)
    if counts["train"] == 0:
        raise Unprocessable(f"trainArgs.data: dataset '{uri}' has no training images")
    return DatasetRef(dataset.id, uri, counts["train"], counts["val"], len(dataset.class_names or []) or None,
                      dataset.task)


def resolve_base_model(session: Session, principal: Principal, model: Any, *, task: str) -> tuple[str, str]:
    """(what the trainer loads, the architecture name the estimator profiles). No model named: the best
    pretrained start this server has for the task (``projects.starting``), else a YAML (random weights)."""
    if not model:
        start = starting.best(session, principal, task)
        model = start.uri if start is not None else scratch_yaml(task)
    name = str(model)
    if refs.is_model_uri(name):
        parts = refs.model_parts(name)
        if parts is None or not all(parts):
            raise Unprocessable("trainArgs.model: must look like ul://owner/project/model")
        try:
            record = projects_service.get_model(session, principal, owner=parts[0], project=parts[1],
                                                model=parts[2])
        except NotFound as exc:  # an official model not installed here: its message says how to add it
            detail = exc.message if official.is_official_owner(parts[0]) else f"model '{name}' not found"
            raise Unprocessable(f"trainArgs.model: {detail}") from None
        if record.weights_sha256 is None:
            raise Unprocessable(f"trainArgs.model: model '{name}' has no weights to start from")
        return name, refs.architecture_of(record)
    if not refs.is_plain_name(name):
        raise Unprocessable("trainArgs.model: a model YAML or weights name (yolo11n.yaml), or ul://owner/project/model")
    installed = official.find_by_weights_name(session, name)
    if installed is not None:  # yolo11n.pt: the operator's copy of the official weights, nothing downloaded
        return f"ul://{official.OWNER}/{official.split_name(name)[0]}/{installed.slug}", refs.yaml_name(name)
    return name, refs.yaml_name(name)


def scratch_yaml(task: str) -> str:
    """The architecture a model of ``task`` trains from when no pretrained start exists (random weights)."""
    suffix = {"segment": "-seg", "pose": "-pose", "obb": "-obb", "classify": "-cls"}.get(task, "")
    return f"yolo11n{suffix}.yaml"


def choose_gpu(catalogue: Catalogue, executor: Executor, principal: Principal, wanted: str | None) -> GpuType:
    if wanted is None:
        capacity = executor.capacity()
        candidates = sorted((g for g in catalogue.offered() if g.allowed_for(principal.tier)
                             and capacity.get(g.id) and capacity[g.id].total), key=lambda g: g.price_per_hour)
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
        raise Unprocessable(f"gpuType: no worker here has a {gpu.display_name} (available: {', '.join(offered)})")
    return gpu


def is_quick_run(args: dict[str, Any]) -> bool:
    """A quick test run: part of the data for a few epochs; its speed re-estimates the full run."""
    fraction = float(args.get("fraction", 1.0) or 1.0)
    return fraction < 1.0 and int(args.get("epochs", DEFAULT_FULL_EPOCHS)) <= QUICK_RUN_MAX_EPOCHS


def run_estimate(session: Session, catalogue: Catalogue, principal: Principal, *, architecture: str,
                 dataset: DatasetRef, args: dict[str, Any], gpu: GpuType) -> dict[str, Any]:
    request = advisor.Request(model=architecture, train_images=dataset.train, val_images=dataset.val,
                              train_args={k: v for k, v in args.items() if k not in ("model", "data")},
                              gpu_types=[gpu.id], tier=principal.tier, nc=dataset.nc)
    try:
        body = advise(session, catalogue, request)
    except BadRequest as exc:  # what the estimate endpoint calls a bad request is, in training.start, bad trainArgs
        raise Unprocessable(exc.message) from None
    return body["estimates"][0]


def hold_micros(estimate: dict[str, Any], max_cost_micros: int | None) -> int:
    """The credit ``start`` holds for a run on the GPU of ``estimate`` (an item of the advisor's answer): the high
    end of its cost in whole cents, nothing on a free GPU, at most the run's cost cap. The train dialog shows
    this figure before launch, so it asks this function rather than repeating the rule."""
    if not billing.dollars_to_micros(estimate["pricePerHour"]):
        return 0
    hold = billing.cents_to_micros(math.ceil(estimate["costCents"]["high"]))
    return hold if max_cost_micros is None else min(hold, max_cost_micros)


def start(session: Session, principal: Principal, body: StartRequest, *, catalogue: Catalogue,
          executor: Executor, executor_name: str) -> dict[str, Any]:
    model = session.get(ModelRecord, body.modelId)
    if model is None:
        raise NotFound(f"model '{body.modelId}' not found")
    project = session.get(Project, model.project_id)
    assert project is not None
    permissions.check(session, user_id=principal.user_id, owner_id=model.owner_id, visibility=project.visibility,
                      action="train", missing=f"model '{body.modelId}' not found",
                      read_only="this model is public but read-only for you")
    # The workspace pays and its plan decides the GPU types: a team's run is the team's, whoever starts it.
    payer = principal if model.owner_id == principal.user_id else Principal.of(session.get(User, model.owner_id))
    active = session.scalar(select(Run.id).where(Run.model_id == model.id,
                                                 Run.status.in_([s.value for s in ACTIVE])).limit(1))
    if active is not None:
        raise Conflict("this model is already training; cancel it or create a new model")
    args = validate_train_args(body.trainArgs)
    dataset = resolve_dataset(session, principal, args.get("data"))
    args["data"] = dataset.uri
    args["model"], architecture = resolve_base_model(session, principal, args.get("model"), task=dataset.task)
    gpu = choose_gpu(catalogue, executor, payer, body.gpuType)
    estimate = run_estimate(session, catalogue, payer, architecture=architecture, dataset=dataset, args=args,
                            gpu=gpu)
    if not estimate["fits"]:
        raise Unprocessable(f"trainArgs.batch: batch {estimate['batch']} needs {estimate['memoryGb']} GB but "
                            f"{gpu.display_name} has {estimate['vramGb']} GB; the largest batch that fits is "
                            f"{estimate['maxBatch']}")

    price_micros = billing.dollars_to_micros(gpu.price_per_hour)
    estimate_micros = billing.cents_to_micros(estimate["costCents"]["value"])
    max_cost = billing.cents_to_micros(body.maxCostCents) if body.maxCostCents is not None else None
    hold = hold_micros(estimate, max_cost)

    version = None
    if body.captureDatasetVersion:
        version = capture_version(session, principal, dataset)
    quick = is_quick_run(args)
    run = create_run(session, model, status=RunStatus.PENDING, reason="training.start",
                     executor=executor_name, gpu_type=gpu.id, epochs=int(args.get("epochs", DEFAULT_FULL_EPOCHS)),
                     train_args=args, launch={"project": f"{payer.username}/{project.slug}", "name": model.slug,
                                              "trainArgs": args,
                                              "fullRunEpochs": body.fullRunEpochs or DEFAULT_FULL_EPOCHS},
                     estimate=estimate, smoke=quick, dataset_version_id=version["id"] if version else None,
                     price_micros_per_hour=price_micros, hold_micros=hold, max_cost_micros=max_cost,
                     started_by_id=principal.user_id)
    if hold:
        budgets.check(session, owner_id=model.owner_id, user_id=principal.user_id, hold_micros=hold)
        billing.place_hold(session, user_id=model.owner_id, run_id=run.id, micros=hold,
                           estimate_micros=estimate_micros, model_id=model.id, gpu_type=gpu.id)
    model.train_args = args
    model.epochs = run.epochs
    model.base_model = str(args["model"])
    model.task = model.task or dataset.task
    model.completed_at = None
    model.training_error = None
    if version:
        model.metadata_ = {**(model.metadata_ or {}), "datasetVersion": version}
    session.flush()
    balance = billing.balances(session, user_id=model.owner_id)
    return {
        "modelId": model.id,
        "status": "starting",
        "gpuType": gpu.id,
        "estimatedCost": {"pricePerHour": gpu.price_per_hour, "gpuMemoryGb": float(estimate["vramGb"])},
        "billing": {"estimatedCostCents": round(estimate["costCents"]["value"], 4),
                    "estimatedCostDisplay": billing.format_cents(estimate_micros),
                    "balanceCents": billing.micros_to_fractional_cents(balance.available)},
        # Lanner extensions
        "runId": run.id,
        "queued": True,
        "smokeRun": quick,
        "holdCents": billing.micros_to_fractional_cents(hold),
        "estimate": {k: estimate[k] for k in ("epochSeconds", "totalSeconds", "costCents", "batch", "memoryGb",
                                              "loaderBound")},
        **({"datasetVersion": version} if version else {}),
    }


def capture_version(session: Session, principal: Principal, dataset: DatasetRef) -> dict[str, Any]:
    record = session.get(Dataset, dataset.id)
    assert record is not None
    if not permissions.can(session, user_id=principal.user_id, owner_id=record.owner_id, action="write"):
        raise Forbidden("captureDatasetVersion: only those who may change the dataset can save a version of it")
    version, _ = datasets_service.create_version(session, record, description="Captured for a training run")
    return {"id": version.id, "version": version.version}
