"""``POST /api/training/estimate`` (Lanner extension): time, memory and cost on every GPU type before launch."""

from __future__ import annotations

import math
import re
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.deps import Ctx, DbSession
from lanner.errors import BadRequest, NotFound
from lanner.gpus import advisor
from lanner.gpus.catalogue import get_catalogue
from lanner.training.dependencies import Runtime

router = APIRouter(tags=["gpus"])


class ImageCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    train: int = Field(ge=1)
    val: int = Field(default=0, ge=0)


class EstimateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="yolo11s.yaml, a weights file name, or ul://owner/project/model")
    dataset: str | None = Field(default=None, description="ul://owner/datasets/slug")
    imageCount: ImageCount | None = None
    imageSize: list[int] | None = Field(default=None, description="[width, height] of a typical source image")
    trainArgs: dict[str, Any] = Field(default_factory=dict)
    gpuTypes: list[str] | None = None
    deadlineMinutes: float | None = Field(default=None, gt=0)
    budgetCents: float | None = Field(default=None, gt=0)


def _dataset_counts(session: Any, principal: Any, uri: str) -> tuple[int, int, int]:
    from lanner.datasets import service as datasets_service

    parts = uri.removeprefix("ul://").split("/")
    if not uri.startswith("ul://") or len(parts) != 3 or parts[1] != "datasets":
        raise BadRequest("dataset must look like ul://owner/datasets/slug")
    try:
        dataset = datasets_service.get_dataset(session, principal, owner=parts[0], slug=parts[2])
    except NotFound:
        raise NotFound(f"dataset: '{uri}' not found") from None
    counts = datasets_service.counts(session, dataset.manifest_id)
    return counts["train"], counts["val"], len(dataset.class_names or [])


def _safe_name(model: str) -> str:
    """Only model *names* reach the profiler: a path could make the server unpickle a file of the caller's choosing."""
    if not model or "/" in model or "\\" in model or model.startswith(".") or "\x00" in model:
        raise BadRequest("model must be a name such as yolo11s.yaml or yolo11s.pt, or ul://owner/project/model")
    # Weights are profiled through their architecture's YAML: the API never opens a checkpoint file, even one
    # that happens to sit in the server's working directory under that name.
    return model[:-3] + ".yaml" if model.endswith(".pt") else model


# Parameter counts of the YOLO11 detection sizes, for a checkpoint whose architecture is not recorded.
_SIZES_BY_PARAMS = (("n", 2.6e6), ("s", 9.4e6), ("m", 20.1e6), ("l", 25.3e6), ("x", 56.9e6))
_NAMED_ARCH = re.compile(r"(yolo(?:v?\d+))([nsmlx])", re.IGNORECASE)
_OFFICIAL_ARCH = re.compile(r"^yolo(?:v?\d+)[nsmlx](?:-(?:seg|pose|obb|cls))?\.yaml$", re.IGNORECASE)


def architecture_of(record: Any) -> str:
    """The architecture a model was trained from, by name only (the server never unpickles a checkpoint):
    its recorded base, else a YOLO name in its own names (``yolo11n-scratch``), else the nearest YOLO11 size
    by checkpoint bytes (the trainer saves FP16 weights: about 2 bytes a parameter)."""
    base = (record.train_args or {}).get("model") or record.base_model
    if base and not str(base).startswith("ul://"):
        name = _safe_name(str(base).replace("\\", "/").rsplit("/", 1)[-1])
        if _OFFICIAL_ARCH.match(name) or not _NAMED_ARCH.search(name):
            return name
    for text in (base, record.weights_name, record.slug, record.name):
        match = _NAMED_ARCH.search(str(text or "").rsplit("/", 1)[-1])
        if match:
            return f"{match.group(1).lower()}{match.group(2).lower()}.yaml"
    if record.weights_size:
        params = record.weights_size / 2.0
        size = min(_SIZES_BY_PARAMS, key=lambda item: abs(math.log(item[1] / max(params, 1.0))))[0]
        return f"yolo11{size}.yaml"
    raise BadRequest(f"model: cannot tell the architecture of '{record.slug}'")


def _model_name(session: Any, principal: Any, model: str) -> str:
    """A ul:// model resolves to the YAML or base weights it was trained from (its architecture)."""
    if not model.startswith("ul://"):
        return _safe_name(model)
    from lanner.projects import service as projects_service

    parts = model.removeprefix("ul://").split("/")
    if len(parts) != 3:
        raise BadRequest("model must look like ul://owner/project/model")
    try:
        record = projects_service.get_model(session, principal, owner=parts[0], project=parts[1], model=parts[2])
    except NotFound as exc:
        raise NotFound(f"model: '{model}' not found ({exc.message})") from None
    return architecture_of(record)


def _check_whole_numbers(train_args: dict[str, Any]) -> None:
    """The trainer refuses imgsz=640.5 and epochs=2.5 (its check_cfg / check_imgsz); an estimate that quietly
    truncated them would describe a run that can never start."""
    for key in ("epochs", "imgsz"):
        value = train_args.get(key)
        if isinstance(value, float) and not value.is_integer():
            raise BadRequest(f"trainArgs.{key} must be a whole number, not {value:g}")


@router.post("/api/training/estimate", summary="Estimate time, memory and cost on every GPU type (Lanner)",
             description="Before launch: per GPU type the batch used (AutoBatch resolved), whether it fits, peak "
                         "memory, the largest batch that fits, epoch and total time and cost as value/low/high "
                         "ranges from the calibration residuals, whether the run is loader-bound, and a cheapest / "
                         "fastest / balanced recommendation under an optional deadline and budget.")
def estimate(body: EstimateRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
             runtime: Runtime) -> dict[str, Any]:
    if (body.dataset is None) == (body.imageCount is None):
        raise BadRequest("give either dataset (ul://owner/datasets/slug) or imageCount {train, val}")
    nc = None
    if body.dataset is not None:
        train, val, nc = _dataset_counts(session, principal, body.dataset)
        if train == 0:
            raise BadRequest(f"dataset: '{body.dataset}' has no training images")
    else:
        assert body.imageCount is not None
        train, val = body.imageCount.train, body.imageCount.val
    _check_whole_numbers(body.trainArgs)
    if body.imageSize is not None and (len(body.imageSize) != 2 or min(body.imageSize) <= 0
                                       or max(body.imageSize) > 100_000):
        raise BadRequest("imageSize must be [width, height] with positive values (at most 100000)")
    request = advisor.Request(model=_model_name(session, principal, body.model), train_images=train,
                              val_images=val, train_args=body.trainArgs, gpu_types=body.gpuTypes,
                              deadline_minutes=body.deadlineMinutes, budget_cents=body.budgetCents,
                              tier=principal.tier, nc=nc or None,
                              source_image_size=(body.imageSize[0], body.imageSize[1]) if body.imageSize else None)
    body = advisor.estimate(session, get_catalogue(ctx), request)
    from lanner.training.router import availability_now

    levels = availability_now(runtime)
    for item in body["estimates"]:  # from the executors' free capacity right now; null: nothing here has one
        item["availability"] = levels.get(item["gpuType"])
    return body
