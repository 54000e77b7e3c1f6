"""What the model page shows of a model's exports (``lanner.web``): the formats this server can build from the
page (buttons), those it cannot (with the reason ``formats.unavailable`` gives), and every export of the model
with its status, size, times and a signed download link once completed. Read with the caller's access through
``exports.service``, so a page shows what ``exports.list`` would answer the same user."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.db import utcnow
from lanner.exports import jobs, service
from lanner.exports.formats import FORMATS, unavailable
from lanner.projects.models import ModelRecord
from lanner.storage.signing import URLSigner
from lanner.teams import permissions

FIRST = ("onnx", "torchscript", "openvino")  # the formats most people want, in that order
LISTED = 20  # exports shown (newest first)
LABELS = {"onnx": "ONNX", "torchscript": "TorchScript", "openvino": "OpenVINO", "engine": "TensorRT",
          "coreml": "Core ML", "coreai": "Core AI", "saved_model": "TF SavedModel", "pb": "TF GraphDef",
          "edgetpu": "Edge TPU", "litert": "LiteRT", "paddle": "PaddlePaddle", "mnn": "MNN", "ncnn": "NCNN",
          "imx": "IMX500", "rknn": "RKNN", "executorch": "ExecuTorch", "axelera": "Axelera", "deepx": "DEEPX",
          "qnn": "QNN", "hailo": "Hailo", "ascend": "Ascend", "xilinx": "Xilinx"}


def label(name: str) -> str:
    return LABELS.get(name, name)


def buildable() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(formats a page can start here, formats it cannot with why). A TensorRT engine is built on a GPU the
    request names, which the page's one-click form does not: the API and ``ul cloud export`` take it."""
    ready, refused = [], []
    for name in sorted(FORMATS, key=lambda n: (FIRST.index(n) if n in FIRST else len(FIRST), n)):
        reason = unavailable(name)
        if reason is None and FORMATS[name].gpu:
            reason = f"format '{name}' is built on a GPU named in the request: use the API or `ul cloud export`"
        (refused if reason else ready).append({"name": name, "label": label(name), **({"reason": reason}
                                                                                      if reason else {})})
    return ready, refused


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None:
        return None
    return max(0.0, ((end or utcnow()) - start).total_seconds())


def row(job: Any, signer: URLSigner) -> dict[str, Any]:
    """One export as the page lists it."""
    done = job.status == jobs.COMPLETED and job.sha256
    return {"id": job.id, "format": job.format, "label": label(job.format), "status": job.status,
            "active": job.status in jobs.ACTIVE, "filename": job.filename, "size": job.size if done else None,
            "created_at": job.created_at, "completed_at": job.completed_at,
            "seconds": _seconds(job.started_at or job.created_at, job.completed_at),
            "args": ", ".join(f"{k}={v}" for k, v in sorted((job.args or {}).items())),
            "gpu_type": job.gpu_type if job.gpu_type != "cpu" else "",
            "url": signer.download_url(job.sha256, job.filename) if done else None,
            "error": (job.error or "cancelled by its owner")[:300] if job.status in (jobs.FAILED, jobs.CANCELLED)
            else None}


def section(session: Session, principal: Principal, record: ModelRecord, *, owner: str, project: str,
            signer: URLSigner) -> dict[str, Any]:
    """The model page's Export section; ``can_export``: the caller may start one (who may train in the workspace:
    an editor, ``teams.permissions``)."""
    can_export = permissions.can(session, user_id=principal.user_id, owner_id=record.owner_id, action="train")
    found = service.list_exports(session, principal, owner=owner, project=project, model=record.slug, status=None,
                                 limit=LISTED)
    rows = [row(job, signer) for job in found]
    ready, refused = buildable()
    return {"rows": rows, "active": any(r["active"] for r in rows), "formats": ready, "unavailable": refused,
            "can_export": can_export, "has_weights": record.weights_sha256 is not None}
