"""Wire shapes of ``exports.*``, as ``ultralytics_platform/types.py`` declares them (``ExportsRetrieveResponseExport``
and friends)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lanner.bounds import JsonObject
from lanner.db import iso
from lanner.exports import jobs
from lanner.exports.models import ModelExport
from lanner.storage.signing import URLSigner

REGION = "us"
FormatName = Literal["torchscript", "onnx", "openvino", "engine", "coreml", "coreai", "saved_model", "pb", "edgetpu",
                     "litert", "paddle", "mnn", "ncnn", "imx", "rknn", "executorch", "axelera", "deepx", "qnn",
                     "hailo", "ascend", "xilinx"]
StatusName = Literal["queued", "starting", "running", "completed", "failed", "cancelled"]


class ExportCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    format: FormatName = Field(description="Target format; a format this server cannot make is a 422 saying why.")
    gpuType: str | None = Field(default=None, max_length=64,
                                description="GPU type to export on (TensorRT engines are built for it); default "
                                "the CPU.")
    args: JsonObject | None = Field(default=None, description="Export arguments: imgsz, batch, quantize (or half), "
                                    "dynamic, simplify, opset, nms, workspace.")


class MobileResolve(BaseModel):
    expires: int = Field(ge=0, le=2**53)
    signature: str = Field(max_length=128)


def export_item(job: ModelExport, signer: URLSigner) -> dict[str, Any]:
    """One export as ``ExportsRetrieveResponseExport``: a completed one with its signed download link (the CLI
    downloads it without a key), a failed or cancelled one with the reason."""
    item: dict[str, Any] = {"id": job.id, "status": job.status, "format": job.format, "args": dict(job.args or {})}
    if job.gpu_type and job.gpu_type != "cpu":
        item["gpuType"] = job.gpu_type
    if job.status == jobs.COMPLETED and job.sha256:
        item["file"] = {"size": float(job.size or 0), "downloadUrl": signer.download_url(job.sha256, job.filename),
                        "downloadFilename": job.filename}
    if job.status in (jobs.FAILED, jobs.CANCELLED):
        message = job.error or "cancelled by its owner"
        item["error"] = {"message": message, "timestamp": iso(job.failed_at or job.completed_at or job.updated_at)}
    if job.started_at:
        item["startedAt"] = iso(job.started_at)
    if job.completed_at:
        item["completedAt"] = iso(job.completed_at)
    item["createdAt"] = iso(job.created_at)
    item["updatedAt"] = iso(job.updated_at)
    return item
