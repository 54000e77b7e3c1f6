"""Estimates of a training run before launch (``POST /api/training/estimate``, ``lanner estimate``): resolve what
the request names (a dataset's image counts, a model's architecture), then let the GPU advisor estimate it,
priced by billing's own rule so an estimate costs what the run will be charged."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from lanner.accounts.service import Principal
from lanner.billing.metering import cost_micros
from lanner.db import Database
from lanner.errors import BadRequest, NotFound
from lanner.gpus import advisor, profile_cache
from lanner.gpus.catalogue import Catalogue
from lanner.training import refs

if TYPE_CHECKING:  # start-up cost: the request's pydantic model only where the API builds one
    from lanner.training.schemas import EstimateRequest


def dataset_counts(session: Session, principal: Principal, uri: str) -> tuple[int, int, int]:
    """(train images, val images, classes) of ``ul://owner/datasets/slug``."""
    # start-up cost: the datasets domain only for a dataset reference (`lanner estimate --train-images` needs none)
    from lanner.datasets import service as datasets_service

    parts = refs.dataset_parts(uri)
    if parts is None:
        raise BadRequest("dataset must look like ul://owner/datasets/slug")
    try:
        dataset = datasets_service.get_dataset(session, principal, owner=parts[0], slug=parts[1])
    except NotFound:
        raise NotFound(f"dataset: '{uri}' not found") from None
    counts = datasets_service.dataset_counts(session, dataset)
    return counts["train"], counts["val"], len(dataset.class_names or [])


def model_architecture(session: Session, principal: Principal, model: str) -> str:
    """The model name the advisor profiles: a ul:// model resolves to the architecture it was trained from."""
    if not refs.is_model_uri(model):
        return refs.profiled_name(model)
    parts = refs.model_parts(model)
    if parts is None:
        raise BadRequest("model must look like ul://owner/project/model")
    from lanner.projects import service as projects_service  # start-up cost: only for a ul:// model

    try:
        record = projects_service.get_model(session, principal, owner=parts[0], project=parts[1], model=parts[2])
    except NotFound as exc:
        raise NotFound(f"model: '{model}' not found ({exc.message})") from None
    return refs.architecture_of(record)


def advise(session: Session, catalogue: Catalogue, request: advisor.Request) -> dict[str, Any]:
    """The advisor's estimate, priced as billing charges."""
    return advisor.estimate(session, catalogue, request, price=cost_micros)


def _check_whole_numbers(train_args: dict[str, Any]) -> None:
    """The trainer refuses imgsz=640.5 and epochs=2.5 (its check_cfg / check_imgsz); an estimate that quietly
    truncated them would describe a run that can never start."""
    for key in ("epochs", "imgsz"):
        value = train_args.get(key)
        if isinstance(value, float) and not value.is_integer():
            raise BadRequest(f"trainArgs.{key} must be a whole number, not {value:g}")


def estimate(session: Session, principal: Principal, body: EstimateRequest, *, catalogue: Catalogue) -> dict[str, Any]:
    """Time, memory and cost on every GPU type (or those asked for), with a recommendation."""
    if (body.dataset is None) == (body.imageCount is None):
        raise BadRequest("give either dataset (ul://owner/datasets/slug) or imageCount {train, val}")
    nc = None
    if body.dataset is not None:
        train, val, nc = dataset_counts(session, principal, body.dataset)
        if train == 0:
            raise BadRequest(f"dataset: '{body.dataset}' has no training images")
    else:
        assert body.imageCount is not None
        train, val = body.imageCount.train, body.imageCount.val
    _check_whole_numbers(body.trainArgs)
    if body.imageSize is not None and (len(body.imageSize) != 2 or min(body.imageSize) <= 0
                                       or max(body.imageSize) > 100_000):
        raise BadRequest("imageSize must be [width, height] with positive values (at most 100000)")
    request = advisor.Request(model=model_architecture(session, principal, body.model), train_images=train,
                              val_images=val, train_args=body.trainArgs, gpu_types=body.gpuTypes,
                              deadline_minutes=body.deadlineMinutes, budget_cents=body.budgetCents,
                              tier=principal.tier, nc=nc or None,
                              source_image_size=(body.imageSize[0], body.imageSize[1]) if body.imageSize else None)
    return advise(session, catalogue, request)


PROFILE_CACHE = "cache/model-profiles.json"  # under LANNER_HOME: what profiling models found (gpus.profile_cache)
WARM_UP_MODELS = ("yolo11n.yaml",)  # what the train dialog and training.start start from by default


def warm_up(db: Database, catalogue: Catalogue, home: Path, models: tuple[str, ...] = WARM_UP_MODELS) -> None:
    """What the first estimate of a process would pay (torch and ultralytics imported, each model built,
    profiled and traced: 6-10 s on a busy machine), paid before any request asks: keep profiles on disk under
    ``home`` and estimate each default model once, as ``training.start`` would. Profiles already on disk make it
    cheap (no torch at all). Meant for a background thread at server start."""
    profile_cache.use_file(home / PROFILE_CACHE)
    for model in models:
        request = advisor.Request(model=model, train_images=100, val_images=20, train_args={}, tier="enterprise")
        with db.session() as session:
            advise(session, catalogue, request)
