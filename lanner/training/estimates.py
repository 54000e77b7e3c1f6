"""Estimates of a training run before launch (``POST /api/training/estimate``, the train dialog, ``lanner
estimate``): what the request names is resolved as ``training.start`` resolves it (``training.inputs``), then the
GPU advisor estimates it, priced by billing's own rule so an estimate costs what the run will be charged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.db import Database
from lanner.errors import BadRequest, LannerError, NotFound
from lanner.gpus import profile_cache
from lanner.gpus.catalogue import Catalogue
from lanner.training import inputs
from lanner.training.schemas import EstimateRequest

# The estimate's refusals of what a request names (``inputs.Unresolved``), in its own words and status codes.
WORDS: dict[tuple[str, str], tuple[type[LannerError], str]] = {
    ("data", "shape"): (BadRequest, "dataset must look like ul://owner/datasets/slug"),
    ("data", "missing"): (NotFound, "dataset: '{name}' not found"),
    ("data", "empty"): (BadRequest, "dataset: '{name}' has no training images"),
    ("model", "shape"): (BadRequest, "model must look like ul://owner/project/model"),
    ("model", "missing"): (NotFound, "model: '{name}' not found ({detail})"),
    ("model", "not_installed"): (NotFound, "model: '{name}' not found ({detail})"),
    ("model", "name"): (BadRequest, "model must be a name such as yolo11s.yaml or yolo11s.pt, "
                                    "or ul://owner/project/model"),
}


def _check_whole_numbers(train_args: dict[str, Any]) -> None:
    """The trainer refuses imgsz=640.5 and epochs=2.5 (its check_cfg / check_imgsz); an estimate that quietly
    truncated them would describe a run that can never start."""
    for key in ("epochs", "imgsz"):
        value = train_args.get(key)
        if isinstance(value, float) and not value.is_integer():
            raise BadRequest(f"trainArgs.{key} must be a whole number, not {value:g}")


def estimate(session: Session, principal: Principal, body: EstimateRequest, *, catalogue: Catalogue) -> dict[str, Any]:
    """Time, memory and cost on every GPU type (or those asked for), with a recommendation. Ends the session's
    transaction, as ``estimate_named`` says."""
    if (body.dataset is None) == (body.imageCount is None):
        raise BadRequest("give either dataset (ul://owner/datasets/slug) or imageCount {train, val}")
    _check_whole_numbers(body.trainArgs)
    if body.imageSize is not None and (len(body.imageSize) != 2 or min(body.imageSize) <= 0
                                       or max(body.imageSize) > 100_000):
        raise BadRequest("imageSize must be [width, height] with positive values (at most 100000)")
    return estimate_named(session, principal, catalogue, model=body.model, data=body.dataset,
                          images=(body.imageCount.train, body.imageCount.val) if body.imageCount else None,
                          train_args=body.trainArgs, gpu_types=body.gpuTypes, deadline_minutes=body.deadlineMinutes,
                          budget_cents=body.budgetCents,
                          source_image_size=(body.imageSize[0], body.imageSize[1]) if body.imageSize else None,
                          gpu_count=body.gpuCount)


def estimate_named(session: Session, principal: Principal, catalogue: Catalogue, *, model: str, data: str | None,
                   images: tuple[int, int] | None, train_args: dict[str, Any], gpu_types: list[str] | None = None,
                   deadline_minutes: float | None = None, budget_cents: float | None = None,
                   source_image_size: tuple[int, int] | None = None, gpu_count: int = 1) -> dict[str, Any]:
    """The estimate of ``model`` trained on ``data`` (or on ``images``: train, val) with ``train_args`` on
    ``gpu_count`` GPUs of each type, as ``principal`` (their tier, what they may read). The names are resolved in
    the session; its transaction is then committed, so a model profiled for the first time (seconds) holds no lock
    (``inputs.TrainingInputs.profile``): call it with nothing to roll back."""
    try:
        resolved = inputs.resolve(session, principal, model=model, data=data, images=images)
    except inputs.Unresolved as exc:
        raise inputs.refusal(exc, WORDS) from None
    session.commit()
    resolved.profile(train_args)
    return resolved.estimate(session, catalogue, train_args, tier=principal.tier, gpu_types=gpu_types,
                             deadline_minutes=deadline_minutes, budget_cents=budget_cents,
                             source_image_size=source_image_size, gpu_count=gpu_count)


PROFILE_CACHE = "cache/model-profiles.json"  # under LANNER_HOME: what profiling models found (gpus.profile_cache)
WARM_UP_MODELS = ("yolo11n.yaml",)  # what the train dialog and training.start start from by default


def warm_up(db: Database, catalogue: Catalogue, home: Path, models: tuple[str, ...] = WARM_UP_MODELS) -> None:
    """What the first estimate of a process would pay (torch and ultralytics imported, each model built,
    profiled and traced: 6-10 s on a busy machine), paid before any request asks: keep profiles on disk under
    ``home`` and estimate each default model once, as ``training.start`` would. Profiles already on disk make it
    cheap (no torch at all). Meant for a background thread at server start."""
    profile_cache.use_file(home / PROFILE_CACHE)
    for model in models:
        with db.session() as session:
            estimate_named(session, Principal.operator(), catalogue, model=model, data=None, images=(100, 20),
                           train_args={})
