"""Request bodies of the training protocol (what ``ultralytics/utils/callbacks/platform.py`` sends), of
``training.start``, and of the estimate (a Lanner extension)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lanner.bounds import BigCount, Count, FiniteFloat, JsonObject, RowId, stored_json_copy

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
    modelId: str | None = Field(default=None, max_length=64)
    project: str | None = Field(default=None, max_length=300)
    name: str | None = Field(default=None, max_length=200)

    @field_validator("data")
    @classmethod
    def _storable(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Stored as sent (metrics, console, plots): NaN and infinities become null, as the trainer itself
        sends them (``_sanitize_json_value``); what the database cannot store is refused. Its size is bounded by
        the request body limit (a 1000-class model's ``training_complete`` is about 13 MB)."""
        return stored_json_copy(data)


class EpochEndData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    epoch: Count
    metrics: dict[str, Any] = Field(default_factory=dict)
    system: dict[str, Any] | None = None
    fitness: FiniteFloat | None = None
    best_fitness: FiniteFloat | None = None
    modelInfo: dict[str, Any] | None = None
    total_epochs: Count | None = None
    epochs_total: Count | None = None


class ConsoleData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    chunkId: BigCount  # the trainer's start time in milliseconds, plus one per chunk
    content: str
    lineCount: Count = 0


class CheckpointSavedData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    modelPath: str = Field(min_length=1)
    runId: RowId | None = None
    uploadPath: str | None = None


class TrainingCompleteData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    results: dict[str, Any] = Field(default_factory=dict)
    classNames: list[Any] | None = None
    plots: list[Any] | None = None
    runId: RowId | None = None

    @field_validator("results")
    @classmethod
    def _stored_results(cls, results: dict[str, Any]) -> dict[str, Any]:
        """``bestEpoch`` and ``bestFitness`` go into the model's columns: typed as such when present."""
        _ResultColumns.model_validate(results)
        return results


class _ResultColumns(BaseModel):
    bestEpoch: Count | None = None
    bestFitness: FiniteFloat | None = None


class TrainingFailedData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    error: str | None = None
    code: str | None = Field(default=None, max_length=40)  # the run's termination reason
    instanceId: str | None = None


class UploadCheckpointRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    filename: str = Field(min_length=1, max_length=200)
    modelId: str | None = Field(default=None, max_length=64)
    runId: RowId | None = None
    project: str | None = Field(default=None, max_length=300)
    name: str | None = Field(default=None, max_length=200)
    size: FiniteFloat | None = Field(default=None, ge=0)
    # Lanner's worker: it can PUT to the blob store's own presigned URL and confirms the upload afterwards
    # (``UploadCheckpointDone``); the trainer's own uploads, which it cannot confirm, keep Lanner's signed route.
    direct: bool = False


class UploadCheckpointDone(BaseModel):
    """``/api/webhooks/models/upload/complete``: the file is on a direct slot's presigned URL."""

    model_config = ConfigDict(extra="ignore")

    modelId: str = Field(min_length=1, max_length=64)
    uploadPath: str = Field(min_length=1, max_length=300)


MAX_GPU_COUNT = 8  # GPUs of one type on one node: what one machine holds
# How many GPUs of the chosen type one run trains on (DDP on one node). Strict: 2.0, "2" and true are refused.
GpuCount = Annotated[int, Field(ge=1, le=MAX_GPU_COUNT, strict=True)]


class StartRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    modelId: str = Field(min_length=1, max_length=64)
    gpuType: str | None = Field(default=None, max_length=64)
    captureDatasetVersion: bool | None = None
    trainArgs: JsonObject = Field(default_factory=dict)
    maxCostCents: FiniteFloat | None = Field(default=None, gt=0, description="Lanner: cancel the run when it has "
                                             "cost this")
    fullRunEpochs: Annotated[Count, Field(ge=1)] | None = Field(
        default=None, description="Lanner: epochs of the full run a quick test run re-estimates (default: 100)")
    allowFallback: bool = Field(default=False, description="Lanner: when no node of gpuType comes up within its "
                                "pool's start timeout, move to the next type the advisor ranks that the hold covers")
    gpuCount: GpuCount = Field(default=1, description="Lanner: GPUs of gpuType on one node (1-8); the run is "
                               "priced per GPU-hour times this, and the trainer gets device=0,1,...")


class ImageCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    train: Annotated[Count, Field(ge=1)]
    val: Count = 0


class EstimateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="yolo11s.yaml, a weights file name, or ul://owner/project/model")
    dataset: str | None = Field(default=None, description="ul://owner/datasets/slug")
    imageCount: ImageCount | None = None
    imageSize: list[Count] | None = Field(default=None, description="[width, height] of a typical source image")
    trainArgs: JsonObject = Field(default_factory=dict)
    gpuTypes: list[str] | None = None
    deadlineMinutes: FiniteFloat | None = Field(default=None, gt=0)
    budgetCents: FiniteFloat | None = Field(default=None, gt=0)
    gpuCount: GpuCount = Field(default=1, description="GPUs of each type on one node (1-8): time, memory per GPU "
                               "and cost of a run on that many")
