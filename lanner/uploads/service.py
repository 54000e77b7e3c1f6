"""Generic uploads: a signed URL for a dataset archive or a model checkpoint, and completing the upload.

This package stands above the domains it serves: it checks that the dataset or the model an upload is for
belongs to the caller, and a completed checkpoint upload becomes its model's weights. Importing a dataset
archive is the datasets domain's own call (``datasets.ingest``), which takes the completed upload from here.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.datasets.models import Dataset
from lanner.db import iso, utcnow
from lanner.errors import BadRequest, NotFound, PayloadTooLarge
from lanner.exports import jobs as export_jobs
from lanner.projects.models import ModelRecord
from lanner.storage import upload_sessions
from lanner.storage.blobs import BlobStore
from lanner.storage.models import UploadSession
from lanner.storage.signing import URLSigner
from lanner.teams import permissions
from lanner.training import checkpoints
from lanner.training import state as training_state

ASSET_TYPES = ("datasets", "models")
DATASET_UPLOAD_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".ndjson")

SESSION_PREFIX = upload_sessions.SESSION_SLOT_PREFIX


def signed_url(session: Session, principal: Principal, *, signer: URLSigner, blobs: BlobStore, settings: Settings,
               asset_type: str, asset_id: str | None, filename: str, content_type: str | None,
               total_bytes: int | None) -> dict[str, Any]:
    """``upload.signed_url``: open an upload session and hand out the URL to PUT the file to: the bucket's
    presigned URL where the store is one (the bytes never pass through Lanner; ``complete`` or the import
    checks their size, ``upload_sessions.settle`` hashes them), else Lanner's signed PUT route. The URL lives
    ``LANNER_UPLOAD_URL_TTL_SECONDS``; the session expires with it unless the upload was finished."""
    max_bytes = settings.max_upload_bytes
    if asset_type not in ASSET_TYPES:
        raise BadRequest("assetType must be 'datasets' or 'models'")
    filename = filename.replace("\\", "/").rsplit("/", 1)[-1]
    if asset_type == "datasets" and not filename.lower().endswith(DATASET_UPLOAD_SUFFIXES):
        raise BadRequest("dataset uploads must be .zip, .tar, .tar.gz, .tgz or .ndjson: package images into an archive")
    if asset_type == "models" and not filename.endswith(".pt"):
        raise BadRequest("model uploads must be .pt checkpoints")
    if total_bytes is not None and total_bytes > max_bytes:
        raise BadRequest(f"upload of {total_bytes} bytes exceeds the limit of {max_bytes}")
    if asset_id:  # only a member who may write there uploads into it (a viewer: the table's 403)
        target = session.get(Dataset if asset_type == "datasets" else ModelRecord, asset_id)
        missing = f"{asset_type[:-1]} not found"
        if target is None:
            raise NotFound(missing)
        permissions.check(session, user_id=principal.user_id, owner_id=target.owner_id, visibility="private",
                          action="write", missing=missing, read_only=missing)
    ttl = settings.upload_url_ttl_seconds
    expires = utcnow().replace(microsecond=0) + timedelta(seconds=ttl)
    upload = upload_sessions.create(session, UploadSession(
        owner_id=principal.user_id, asset_type=asset_type, asset_id=asset_id, filename=filename,
        content_type=content_type, total_bytes=total_bytes, expires_at=expires))
    slot = upload_sessions.slot_key(upload)
    url = blobs.presigned_put(slot, expires.timestamp()) or signer.upload_url(slot, expires_at=expires.timestamp())
    return {"sessionId": upload.id, "uploadUrl": url,
            "expiresAt": iso(expires), "headers": {"Content-Type": "application/octet-stream"}}


def complete(session: Session, principal: Principal, *, session_id: str,
             staged: upload_sessions.Staged | None = None) -> UploadSession:
    """``upload.complete``: check the size announced (``staged``: a file PUT into a bucket, whose size
    ``upload_sessions.find_staged`` read; it is hashed after the answer, by ``upload_sessions.settle``, unless it
    is a checkpoint); a checkpoint upload becomes its model's weights."""
    upload = upload_sessions.get_uploaded(session, owner_id=principal.user_id, session_id=session_id,
                                          staged=staged, found=upload_sessions.COMPLETED)
    if upload.total_bytes is not None and upload.size != upload.total_bytes:
        raise BadRequest(f"uploaded {upload.size} bytes but {upload.total_bytes} were announced")
    upload_sessions.mark_completed(session, upload)
    if upload.asset_type == "models" and upload.asset_id:
        attach_model_weights(session, principal, upload)
    return upload


def attach_model_weights(session: Session, principal: Principal, upload: UploadSession) -> None:
    """``ul cloud train model=./my.pt`` creates a model, uploads the checkpoint with ``assetType: models`` and
    trains from ``ul://owner/project/model``: the upload becomes that model's weights."""
    model = session.get(ModelRecord, upload.asset_id)
    if model is None or not permissions.can(session, user_id=principal.user_id, owner_id=model.owner_id,
                                            action="write"):
        raise NotFound("model not found for this upload")
    model.weights_sha256 = upload.sha256
    model.weights_size = upload.size
    model.weights_name = upload.filename
    upload_sessions.release_file(upload)  # the model holds the weights now
    training_state.mark_model_uploaded(session, model)  # an untrained model becomes a trained one



def open_slot(session: Session, key: str, settings: Settings, content_length: str | None) -> int:
    """Before a signed PUT stores a byte: the slot ``key`` must exist and be unused, and the body no larger than
    the slot allows (the size the upload declared, else the server's limit). Returns that limit; the slot is
    marked as receiving, so a second PUT is refused (409) instead of stored."""
    if key.startswith(SESSION_PREFIX):
        upload = session.get(UploadSession, key.split("/")[1])
        if upload is None:
            raise NotFound("upload session not found")
        limit = settings.max_upload_bytes if upload.total_bytes is None else min(upload.total_bytes,
                                                                               settings.max_upload_bytes)
        upload_sessions.start_receiving(session, upload)  # a used slot says so (409) whatever the body's size
        _check_length(content_length, limit)  # raising rolls the claim back
        return limit
    if key.startswith(export_jobs.SLOT_PREFIX):  # an export worker delivering its artefact
        export_jobs.open_slot(session, key)
        _check_length(content_length, settings.max_upload_bytes)
        return settings.max_upload_bytes
    checkpoints.open_checkpoint_slot(session, key)
    _check_length(content_length, checkpoints.MAX_CHECKPOINT_BYTES)
    return checkpoints.MAX_CHECKPOINT_BYTES


def _check_length(content_length: str | None, limit: int) -> None:
    if content_length is not None and content_length.isdigit() and int(content_length) > limit:
        raise PayloadTooLarge(f"this upload takes at most {limit} bytes (the size it declared, or the server's "
                              f"limit); the body has {content_length}")


def slot_failed(session: Session, key: str, reason: str) -> None:
    """The PUT on ``key`` did not complete: nothing was kept, and the slot may be used again."""
    if key.startswith(SESSION_PREFIX):
        upload = session.get(UploadSession, key.split("/")[1])
        if upload is not None:
            upload_sessions.receiving_failed(session, upload, reason)


def record_upload(session: Session, key: str, *, sha256: str, size: int) -> None:
    """Bytes arrived on the slot ``key``: an upload session's (``sessions/<id>/<file>``) or a checkpoint's."""
    if key.startswith(SESSION_PREFIX):
        upload = session.get(UploadSession, key.split("/")[1])
        if upload is None:
            raise NotFound("upload session not found")
        upload_sessions.mark_uploaded(session, upload, sha256=sha256, size=size)
    elif key.startswith(export_jobs.SLOT_PREFIX):
        export_jobs.record_artefact(session, key, sha256=sha256, size=size)
    else:
        checkpoints.record_checkpoint_upload(session, key, sha256=sha256, size=size)
