"""Checkpoint uploads: the trainer asks for an upload slot (``/api/webhooks/models/upload``), uploads, then names
the checkpoint in ``checkpoint_saved`` or ``training_complete``; only then does it become the model's weights
(promotion). Staged uploads of a run also feed a relaunch's resume (the supervisor).

With blobs in a bucket, every slot is a presigned PUT into the bucket's staging area: the bytes never pass through
an API host. The server then reads the object back, hashes it and records it as an arrival on Lanner's signed
route is recorded (``settle_checkpoint_upload``), when the uploader says it is done: Lanner's training worker,
which asked for a ``direct`` slot, confirms it (``/api/webhooks/models/upload/complete``); the unchanged trainer
names the file in ``checkpoint_saved`` or ``training_complete`` (``settle_named_checkpoint``, before the event is
applied)."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.db import Database, utcnow
from lanner.errors import Conflict, Forbidden, NotFound, Unprocessable
from lanner.projects.models import ModelRecord
from lanner.storage.blobs import BlobStore, StoredBlob
from lanner.training import service
from lanner.training.models import Run, StagedUpload
from lanner.training.schemas import MetricsEvent, UploadCheckpointDone, UploadCheckpointRequest

log = logging.getLogger("lanner.training")
MAX_CHECKPOINT_BYTES = 20 * 1024**3
NOT_UPLOADED = "nothing was uploaded on this checkpoint slot yet: PUT the file to its uploadUrl first"


def _scoped_model(session: Session, principal: Principal, model_id: str | None) -> ModelRecord | None:
    """The model a run-scoped worker key may upload for (its own run's, 403 for any other); None for a user's
    key, which names its model itself."""
    if principal.run_id is None:
        return None
    scoped = session.get(Run, principal.run_id)
    if scoped is None or (model_id and model_id != scoped.model_id):
        raise Forbidden("this worker key may only upload for its own run")
    return service.writable_model(session, principal, scoped.model_id)


def stage_checkpoint_upload(session: Session, principal: Principal, body: UploadCheckpointRequest) -> StagedUpload:
    filename = body.filename.replace("\\", "/").rsplit("/", 1)[-1]
    if not filename or filename in (".", "..") or not filename.endswith((".pt", ".pth", ".onnx", ".zip")):
        raise Unprocessable("filename must be a checkpoint file name such as best.pt")
    scoped = _scoped_model(session, principal, body.modelId)
    if scoped is not None:
        model = scoped
    elif body.modelId:
        model = service.writable_model(session, principal, body.modelId)
    else:
        model = service.model_by_name(session, principal, body.project, body.name)
    run_id = None
    if body.runId is not None:
        run = session.get(Run, body.runId)
        if run is None or run.model_id != model.id:
            raise NotFound(f"run {body.runId} not found for this model")
        run_id = run.id
    path = f"checkpoints/{model.id}/{run_id or 0}/{secrets.token_hex(8)}/{filename}"
    staged = StagedUpload(path=path, model_id=model.id, run_id=run_id, filename=filename)
    session.add(staged)
    session.flush()
    return staged


def open_checkpoint_slot(session: Session, path: str) -> None:
    """Before the signed PUT stores anything: the slot exists and nothing was uploaded to it yet (409)."""
    staged = session.get(StagedUpload, path)
    if staged is None:
        raise NotFound("upload slot not found")
    if staged.sha256 is not None:
        raise Conflict("this checkpoint upload URL was already used; ask for a new one")


def record_checkpoint_upload(session: Session, path: str, *, sha256: str, size: int) -> None:
    """The bytes of a staged checkpoint arrived on its signed PUT (``uploads.router``) or were settled from the
    bucket (``settle_checkpoint_upload``); of two PUTs racing on one slot the first to finish wins, and the
    other's bytes are left for the collector."""
    done = session.execute(update(StagedUpload).where(StagedUpload.path == path, StagedUpload.sha256.is_(None))
                           .values(sha256=sha256, size=size, uploaded_at=utcnow()))
    if done.rowcount != 1:
        raise Conflict("this checkpoint upload URL was already used; ask for a new one")


def settle_checkpoint_upload(db: Database, blobs: BlobStore, principal: Principal,
                             body: UploadCheckpointDone) -> StoredBlob:
    """A checkpoint PUT on a direct slot's presigned URL, which Lanner never saw: read back from the bucket and
    hashed (the uploader's word is never taken), refused above ``MAX_CHECKPOINT_BYTES`` (413, and the object
    goes), filed by digest and recorded on its slot (``record_checkpoint_upload``: once; a second completion of
    the same slot answers what was recorded). The slot must be one of the caller's models' (404), and a worker
    key's own run's (403). Read back outside any transaction: a checkpoint is hundreds of megabytes, and SQLite's
    write lock must not wait for it. 409 when nothing was PUT there."""
    with db.read_session() as session:
        model = _scoped_model(session, principal, body.modelId) or service.writable_model(
            session, principal, body.modelId)
        staged = session.get(StagedUpload, body.uploadPath)
        if staged is None or staged.model_id != model.id:
            raise NotFound("upload slot not found")
        if staged.sha256 is not None and staged.size is not None:
            return StoredBlob(staged.sha256, staged.size)  # completed before (a retry whose answer was lost)
    blob = blobs.settle_staged(body.uploadPath, MAX_CHECKPOINT_BYTES) if blobs.presigns else None
    with db.session() as session:
        if blob is None:
            staged = session.get(StagedUpload, body.uploadPath)
            if staged is not None and staged.sha256 is not None and staged.size is not None:
                return StoredBlob(staged.sha256, staged.size)  # a concurrent completion took it
            raise Conflict(NOT_UPLOADED)
        record_checkpoint_upload(session, body.uploadPath, sha256=blob.sha256, size=blob.size)
    blobs.drop_staged(body.uploadPath)  # filed by digest and recorded: the staged copy has served
    return blob


def named_checkpoint(event: MetricsEvent) -> str | None:
    """The upload path a trainer's event names as its checkpoint: ``checkpoint_saved``'s ``modelPath``,
    ``training_complete``'s ``results.modelPath``; None for any other event."""
    if event.event == "checkpoint_saved":
        path = event.data.get("modelPath")
    elif event.event == "training_complete":
        results = event.data.get("results")
        path = results.get("modelPath") if isinstance(results, dict) else None
    else:
        return None
    return path if isinstance(path, str) and path else None


def settle_named_checkpoint(db: Database, blobs: BlobStore, principal: Principal, event: MetricsEvent) -> None:
    """Settle the bucket upload an event names (``named_checkpoint``) if it is not recorded yet. Nothing is decided
    here: a slot that is unknown, already recorded, empty or unreadable is left for the event itself to judge
    (promotion answers 409 "not uploaded yet", ``training_complete`` keeps its metrics and the model's earlier
    weights), and a slot of a model the caller may not write answers as the event would (404/403)."""
    path = named_checkpoint(event)
    if path is None:
        return
    with db.read_session() as session:
        staged = session.get(StagedUpload, path)
        if staged is None or staged.sha256 is not None:
            return
        model_id = staged.model_id
    try:
        settle_checkpoint_upload(db, blobs, principal, UploadCheckpointDone(uploadPath=path, modelId=model_id))
    except (NotFound, Forbidden):
        raise
    except Exception:  # nothing PUT, too large, the bucket unreachable: the event's metrics must not be lost
        log.warning("checkpoint %s could not be settled; %s goes on without it", path, event.event, exc_info=True)


def promote_checkpoint(session: Session, model: ModelRecord, path: str, run_id: int | None) -> bool:
    staged = session.get(StagedUpload, path)
    if staged is None or staged.model_id != model.id:
        raise NotFound(f"no upload '{path}' for this model")
    if run_id is not None and staged.run_id is not None and staged.run_id != run_id:
        raise Unprocessable("checkpoint_saved: the upload belongs to another run")
    if staged.sha256 is None:
        raise Conflict(f"checkpoint '{path}' was not uploaded yet")
    model.weights_sha256 = staged.sha256
    model.weights_size = staged.size
    model.weights_name = staged.filename
    staged.promoted_at = staged.promoted_at or utcnow()
    return True


def promote_if_uploaded(session: Session, model: ModelRecord, path: str, run_id: int | None) -> None:
    """``training_complete`` names its best weights; they become the model's only if that upload arrived."""
    staged = session.get(StagedUpload, path)
    if staged is not None and staged.model_id == model.id and staged.sha256:
        promote_checkpoint(session, model, path, run_id)


def saved_checkpoints(session: Session, model_id: str, *, limit: int = 50) -> list[StagedUpload]:
    """The checkpoints that arrived for a model, newest first: what its page lists for download."""
    return list(session.scalars(select(StagedUpload).where(StagedUpload.model_id == model_id,
                                                           StagedUpload.sha256.is_not(None))
                                .order_by(StagedUpload.uploaded_at.desc()).limit(limit)))


def resume_checkpoint_url(session: Session, run: Run, signer: Any) -> str | None:
    """Where a relaunched attempt fetches the checkpoint it resumes from: the newest this run uploaded, its
    worker's ``last.pt`` first (a relaunch on another node has no local copy); only this run's uploads, never
    weights the model had from an earlier run."""
    if run.attempt <= 1:
        return None
    staged = session.scalar(select(StagedUpload).where(
        StagedUpload.run_id == run.id, StagedUpload.sha256.is_not(None))
        .order_by((StagedUpload.filename == "last.pt").desc(), StagedUpload.uploaded_at.desc()).limit(1))
    if staged is None or staged.sha256 is None:
        return None
    return signer.download_url(staged.sha256, staged.filename)
