"""SDK ``upload.*`` endpoints (``/api/upload/...``): HTTP only, the logic is in ``uploads.service``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.deps import Ctx, DbSession
from lanner.storage.signing import upload_path
from lanner.uploads import service
from lanner.uploads.schemas import SignedUrlRequest, UploadCompleteRequest

router = APIRouter(tags=["datasets"])


@router.post("/api/upload/signed-url")
def signed_url(body: SignedUrlRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx) -> dict[str, Any]:
    return service.signed_url(session, principal, signer=ctx.signer, max_bytes=ctx.settings.max_upload_bytes,
                              asset_type=body.assetType, asset_id=body.assetId, filename=body.filename,
                              content_type=body.contentType, total_bytes=body.totalBytes)


@router.post("/api/upload/complete")
def upload_complete(body: UploadCompleteRequest, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    upload = service.complete(session, principal, session_id=body.sessionId)
    return {"success": True, "file": {"size": float(upload.size or 0),
                                      **({"contentType": upload.content_type} if upload.content_type else {})}}


@router.put("/api/storage/uploads/{key:path}", tags=["storage"])
async def put_upload(key: str, request: Request, ctx: Ctx) -> dict[str, Any]:
    """The signed PUT of every upload slot (dataset and model uploads, training checkpoints): streamed into the
    blob store, then recorded on its slot. The signature is the credential."""
    ctx.signer.require("PUT", upload_path(key), request.query_params)
    blob = await ctx.blobs.put_stream(request.stream(), max_bytes=service.upload_limit(key, ctx.settings))

    def record() -> None:
        with ctx.db.session() as session:
            service.record_upload(session, key, sha256=blob.sha256, size=blob.size)

    await run_in_threadpool(record)
    return {"sha256": blob.sha256, "size": blob.size}
