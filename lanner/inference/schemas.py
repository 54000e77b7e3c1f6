"""Wire shapes of shared inference: the hosted parameter ranges, and the ``images.predict`` body. The responses
are built by ``lanner.inference.convert`` (the SDK's ``ModelsPredictResponse`` and ``ImagesPredictResponse``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lanner.bounds import Count

# The hosted platform's ranges and defaults (docs: deploy/inference.md), for models.predict and images.predict.
CONF_MIN, CONF_MAX, CONF_DEFAULT = 0.01, 1.0, 0.25
IOU_MIN, IOU_MAX, IOU_DEFAULT = 0.0, 0.95, 0.7
IMGSZ_MIN, IMGSZ_MAX, IMGSZ_DEFAULT = 32, 1280, 640
DECIMALS_MIN, DECIMALS_MAX, DECIMALS_DEFAULT = 0, 10, 5
DEPTH_BITS = (8, 12, 16)
MAX_CLASSES = 100_000  # as many as a dataset may name (lanner.datasets.imports.formats.untrusted)


class ImagePredictRequest(BaseModel):
    """``images.predict``: auto-annotate one dataset image with a model."""

    model_config = ConfigDict(extra="ignore")

    modelId: str = Field(min_length=1, max_length=500, description="ul://owner/project/model of a model you may "
                         "read; hosted models (sam3, yoloe26x, qwen, ...) are not available on a self-hosted server")
    visualPrompts: list[dict[str, Any]] | None = Field(
        default=None, max_length=200, description="Seed labels for the hosted yoloe26x only: refused here")
    confidence: float | None = Field(default=None, ge=CONF_MIN, le=CONF_MAX, allow_inf_nan=False,
                                     description=f"Confidence threshold (default {CONF_DEFAULT})")
    iou: float | None = Field(default=None, ge=IOU_MIN, le=IOU_MAX, allow_inf_nan=False,
                              description=f"NMS IoU threshold (default {IOU_DEFAULT})")
    classMapping: list[Count | None] | None = Field(
        default=None, max_length=MAX_CLASSES, description="The dataset class of each model class, or null to drop "
        "it; without it, model classes map to dataset classes of the same name (or keep their numbers when the "
        "dataset names none)")
