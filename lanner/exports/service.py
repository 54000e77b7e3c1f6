"""``exports.*``: request, list, read, cancel or delete a model's exports, and the mobile import links.

Everything a request can know is checked here, before a job exists: the caller may write the model (another
user's private model is 404, a public one read-only 403), the model has weights (409), the format can be made
on this server and the GPU type exists here (422, with the reason), the arguments are valid (422). The work
itself is the queue's (``exports.queue``)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.db import iso, utcnow
from lanner.errors import Conflict, Forbidden, NotFound, Unprocessable
from lanner.exports import arguments, jobs
from lanner.exports.formats import FORMATS, MOBILE_FORMATS, unavailable
from lanner.exports.models import ModelExport
from lanner.exports.schemas import ExportCreate
from lanner.gpus.catalogue import Catalogue
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord
from lanner.storage.signing import URLSigner
from lanner.training.executors import Executor
from lanner.training.launch import choose_gpu

MOBILE_LINK_SECONDS = 24 * 3600  # the hosted platform's 24-hour import links
MOBILE_PURPOSE = "mobile-import"


def fingerprint(weights_sha256: str, fmt: str, args: dict[str, Any], gpu_type: str) -> str:
    """What the artefact is made of: the same weights, format and arguments make the same export (a TensorRT
    engine is also bound to its GPU type)."""
    device = gpu_type if FORMATS[fmt].gpu else ""
    return hashlib.sha256(json.dumps([weights_sha256, fmt, args, device], sort_keys=True).encode()).hexdigest()


def _gpu_type(body: ExportCreate, principal: Principal, *, catalogue: Catalogue, executor: Executor) -> str:
    fmt = FORMATS[body.format]
    if fmt.gpu and body.gpuType in (None, "cpu"):
        offered = sorted(g.id for g in catalogue.offered() if g.id != "cpu" and executor.offers(g.id))
        raise Unprocessable(f"gpuType: '{body.format}' (TensorRT) engines are built on the NVIDIA GPU they run on: "
                            "pass gpuType" + (f" (here: {', '.join(offered)})" if offered else
                                              "; this server has no GPU worker"))
    if body.gpuType in (None, "cpu"):
        return "cpu"
    return choose_gpu(catalogue, executor, principal, body.gpuType).id


def request_export(session: Session, principal: Principal, *, owner: str, project: str, model: str,
                   body: ExportCreate, catalogue: Catalogue, executor: Executor) -> tuple[ModelExport, bool]:
    """The export asked for: an existing one with the same fingerprint (reused: True), else a new job."""
    record = projects_service.get_model(session, principal, owner=owner, project=project, model=model, write=True)
    if record.weights_sha256 is None:
        raise Conflict(f"model '{owner}/{project}/{model}' has no weights to export yet: train it or upload a "
                       "checkpoint first")
    gpu_type = _gpu_type(body, principal, catalogue=catalogue, executor=executor)
    reason = unavailable(body.format)
    if reason:
        raise Unprocessable(reason)
    fmt = FORMATS[body.format]
    args = arguments.normalise(fmt, body.args, task=record.task, gpu_type=gpu_type)
    key = fingerprint(record.weights_sha256, fmt.name, args, gpu_type)
    existing = session.scalar(select(ModelExport).where(
        ModelExport.model_id == record.id, ModelExport.fingerprint == key,
        ModelExport.status.in_([*jobs.ACTIVE, jobs.COMPLETED])).order_by(ModelExport.created_at.desc()).limit(1))
    if existing is not None:
        return existing, True
    job = ModelExport(model_id=record.id, owner_id=record.owner_id, format=fmt.name, args=args, gpu_type=gpu_type,
                      fingerprint=key, status=jobs.QUEUED, source_sha256=record.weights_sha256,
                      filename=fmt.download_name(record.slug))
    made = session.scalar(select(ModelExport).where(
        ModelExport.fingerprint == key, ModelExport.status == jobs.COMPLETED, ModelExport.sha256.is_not(None)).limit(1))
    if made is not None:  # another model with the same weights (a clone) has it: the same bytes, no work
        now = utcnow()
        job.status, job.source_sha256, job.sha256, job.size = jobs.COMPLETED, None, made.sha256, made.size
        job.started_at = job.completed_at = now
        return jobs.create(session, job, reason=f"the same export as {made.id}"), True
    return jobs.create(session, job, reason="requested"), False


def get_export(session: Session, principal: Principal, *, owner: str, project: str, model: str, export_id: str,
               write: bool = False) -> ModelExport:
    record = projects_service.get_model(session, principal, owner=owner, project=project, model=model, write=write)
    job = session.get(ModelExport, export_id)
    if job is None or job.model_id != record.id:
        raise NotFound(f"export '{export_id}' not found for model '{owner}/{project}/{model}'")
    return job


def list_exports(session: Session, principal: Principal, *, owner: str, project: str, model: str,
                 status: str | None, limit: int | None) -> list[ModelExport]:
    record = projects_service.get_model(session, principal, owner=owner, project=project, model=model)
    query = select(ModelExport).where(ModelExport.model_id == record.id)
    if status:
        query = query.where(ModelExport.status == status)
    query = query.order_by(ModelExport.created_at.desc(), ModelExport.id)
    return list(session.scalars(query.limit(limit or 100)))


def delete_export(session: Session, job: ModelExport) -> tuple[str, str | None]:
    """Cancel an active export (the queue stops its worker) or delete a finished one. Returns the action and
    the digest the row let go of (the caller frees it once nothing else refers to it)."""
    if job.status in jobs.ACTIVE and jobs.cancel(session, job):
        return "cancelled", None
    digest = job.sha256
    session.delete(job)
    session.flush()
    return "deleted", digest


def mobile_link(job: ModelExport, signer: URLSigner) -> dict[str, Any]:
    """A 24-hour bearer link to a completed mobile export: anyone holding it may fetch the model, no sign-in."""
    if job.format not in MOBILE_FORMATS:
        raise Unprocessable(f"mobile import links are for {', '.join(MOBILE_FORMATS)} exports, not {job.format}")
    if job.status != jobs.COMPLETED:
        raise Conflict(f"this export is {job.status}: a mobile link needs a completed export")
    expires = int(time.time()) + MOBILE_LINK_SECONDS
    signature = _mobile_signature(signer, job.id, expires)
    return {"importUrl": f"{signer.public_url}/api/mobile/models/{job.id}#expires={expires}&signature={signature}",
            "expiresAt": _iso_seconds(expires)}


def resolve_mobile(session: Session, export_id: str, *, expires: int, signature: str,
                   signer: URLSigner) -> dict[str, Any]:
    """What a mobile app gets for the fragment of an import link: the model's descriptor and a download link
    that dies with the import link."""
    expected = _mobile_signature(signer, export_id, expires)
    if expires < time.time() or not _same(expected, signature):
        raise Forbidden("invalid or expired import link")
    job = session.get(ModelExport, export_id)
    if job is None or job.status != jobs.COMPLETED or not job.sha256:
        raise NotFound("this export no longer exists")
    record = session.get(ModelRecord, job.model_id)
    assert record is not None
    return {"version": 1, "exportId": job.id, "name": record.name, "task": record.task or "detect",
            "format": job.format, "filename": job.filename, "size": float(job.size or 0),
            "downloadUrl": signer.download_url(job.sha256, job.filename, max(1, expires - int(time.time()))),
            "expiresAt": _iso_seconds(expires)}


def _mobile_signature(signer: URLSigner, export_id: str, expires: int) -> str:
    return signer.sign_value(MOBILE_PURPOSE, f"{export_id}:{expires}").rpartition(".")[2]


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _iso_seconds(epoch: int) -> str:
    return iso(datetime.fromtimestamp(epoch, UTC)) or ""
