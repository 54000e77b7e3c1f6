"""Lanner's own signed-URL endpoints: PUT for uploads, GET for downloads. The signature is the credential."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from lanner.db import utcnow
from lanner.deps import Ctx
from lanner.errors import Forbidden, NotFound, Unprocessable
from lanner.storage import upload_sessions
from lanner.storage.blobs import BlobTooLarge
from lanner.storage.models import UploadSession
from lanner.storage.signing import blob_path, upload_path
from lanner.training.models import StagedUpload

router = APIRouter(tags=["storage"])

MAX_CHECKPOINT_BYTES = 20 * 1024**3


def _check(ctx: Ctx, request: Request, method: str, path: str) -> None:
    if not ctx.signer.verify(method, path, request.query_params.get("expires"),
                             request.query_params.get("signature")):
        raise Forbidden("invalid or expired signature")


@router.put("/api/storage/uploads/{key:path}")
async def put_upload(key: str, request: Request, ctx: Ctx) -> dict[str, Any]:
    _check(ctx, request, "PUT", upload_path(key))
    limit = ctx.settings.max_upload_bytes if key.startswith("sessions/") else MAX_CHECKPOINT_BYTES
    try:
        blob = await ctx.blobs.put_stream(request.stream(), max_bytes=limit)
    except BlobTooLarge as exc:
        raise Unprocessable(str(exc)) from None

    def record() -> None:
        with ctx.db.session() as session:
            if key.startswith("sessions/"):
                upload = session.get(UploadSession, key.split("/")[1])
                if upload is None:
                    raise NotFound("upload session not found")
                upload_sessions.mark_uploaded(session, upload, sha256=blob.sha256, size=blob.size)
                return
            staged = session.get(StagedUpload, key)
            if staged is None:
                raise NotFound("upload slot not found")
            staged.sha256, staged.size, staged.uploaded_at = blob.sha256, blob.size, utcnow()

    await run_in_threadpool(record)
    return {"sha256": blob.sha256, "size": blob.size}


@router.get("/api/storage/blobs/{sha256}/{filename}")
def get_blob(sha256: str, filename: str, request: Request, ctx: Ctx) -> Any:
    _check(ctx, request, "GET", blob_path(sha256, filename))
    try:
        path = ctx.blobs.local_path(sha256)
    except ValueError:
        raise NotFound("file not found") from None
    if path is not None:
        return FileResponse(path, filename=filename, media_type="application/octet-stream")
    if not ctx.blobs.exists(sha256):
        raise NotFound("file not found")
    return StreamingResponse(ctx.blobs.iter_bytes(sha256), media_type="application/octet-stream")
