"""Request bodies of the training protocol (what ``ultralytics/utils/callbacks/platform.py`` sends), of
``training.start``, and of the estimate (a Lanner extension)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

EventName = Literal[
    "training_started",
    "training_progress",
    "epoch_end",
    "system_metrics",
    "console_output",
    "checkpoint_saved",
    "training_complete",
    "training_failed",
]


class MetricsEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")

    event: EventName
    data: dict[str, Any] = Field(default_factory=dict)
    modelId: str | None = None
    project: str | None = None
    name: str | None = None


class EpochEndData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    epoch: int = Field(ge=0)
    metrics: dict[str, Any] = Field(default_factory=dict)
    system: dict[str, Any] | None = None
    fitness: float | None = None
    best_fitness: float | None = None
    modelInfo: dict[str, Any] | None = None
    total_epochs: int | None = Field(default=None, ge=0)
    epochs_total: int | None = Field(default=None, ge=0)


class ConsoleData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    chunkId: int
    content: str
    lineCount: int = 0


class CheckpointSavedData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    modelPath: str = Field(min_length=1)
    runId: int | None = None
    uploadPath: str | None = None


class TrainingCompleteData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    results: dict[str, Any] = Field(default_factory=dict)
    classNames: list[Any] | None = None
    plots: list[Any] | None = None
    runId: int | None = None


class TrainingFailedData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    error: str | None = None
    code: str | None = None
    instanceId: str | None = None


class UploadCheckpointRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    filename: str = Field(min_length=1, max_length=200)
    modelId: str | None = None
    runId: int | None = None
    project: str | None = None
    name: str | None = None
    size: float | None = Field(default=None, ge=0)


class StartRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    modelId: str = Field(min_length=1)
    gpuType: str | None = None
    captureDatasetVersion: bool | None = None
    trainArgs: dict[str, Any] = Field(default_factory=dict)
    maxCostCents: float | None = Field(default=None, gt=0, description="Lanner: cancel the run when it has cost this")
    fullRunEpochs: int | None = Field(default=None, ge=1, description="Lanner: epochs of the full run a quick test "
                                      "run re-estimates (default: 100)")


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
