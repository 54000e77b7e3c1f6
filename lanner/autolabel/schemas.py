"""The SDK's ``datasets.create_batch`` body and the worker's chunk."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lanner.bounds import Count


class BatchCreate(BaseModel):
    """``{modelId, confidence?, iou?, classMapping?, operation?: "annotate", includeAnnotated?}`` or
    ``{operation: "blur", confidence?, boxScale?, preview?, imageId?, previewJobId?}``; ``preview`` runs on up to
    six images and applies nothing; ``previewJobId`` applies such a blur preview's images as they are."""

    model_config = ConfigDict(extra="ignore")

    modelId: str | None = Field(default=None, max_length=300)
    operation: Literal["annotate", "blur"] = "annotate"
    confidence: float = Field(default=0.25, ge=0.0, le=1.0)
    iou: float = Field(default=0.7, ge=0.0, le=1.0)
    classMapping: list[Count | None] | None = Field(default=None, max_length=10_000)
    includeAnnotated: bool = False
    preview: bool = False
    boxScale: float = Field(default=1.0, gt=0.0, le=10.0)
    imageId: str | None = Field(default=None, max_length=100)
    previewJobId: str | None = Field(default=None, max_length=64)


class ChunkResult(BaseModel):
    key: str = Field(max_length=16)
    labels: list[dict[str, Any]] = Field(default_factory=list, max_length=3000)
    partial: bool = False
    faces: list[Annotated[list[Annotated[float, Field(ge=0.0, le=1.0)]], Field(min_length=4, max_length=4)]] = Field(
        default_factory=list, max_length=1000)  # a blur run's: normalised [x, y, w, h] of each face


class Chunk(BaseModel):
    """What a worker posts after each chunk of images (``autolabel.worker``)."""

    results: list[ChunkResult] = Field(max_length=500)
