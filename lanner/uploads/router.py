"""SDK ``upload.*`` endpoints (``/api/upload/...``): HTTP only, the logic is in ``uploads.service``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.db import after_commit
from lanner.http.deps import Ctx, DbSession
from lanner.storage import upload_sessions
from lanner.storage.signing import upload_path
from lanner.uploads import service
from lanner.uploads.schemas import SignedUrlRequest, UploadCompleteRequest
from lanner.uploads.settle import UploadSettler

router = APIRouter(tags=["datasets"])


async def get_settler(request: Request) -> UploadSettler:
    return request.app.state.upload_settler


Settler = Annotated[UploadSettler, Depends(get_settler)]


@router.post("/api/upload/signed-url")
def signed_url(body: SignedUrlRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx) -> dict[str, Any]:
    return service.signed_url(session, principal, signer=ctx.signer, blobs=ctx.blobs, settings=ctx.settings,
                              asset_type=body.assetType, asset_id=body.assetId, filename=body.filename,
                              content_type=body.contentType, total_bytes=body.totalBytes)


@router.post("/api/upload/complete")
def upload_complete(body: UploadCompleteRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                    settler: Settler) -> dict[str, Any]:
    staged = upload_sessions.find_staged(ctx.db, ctx.blobs, owner_id=principal.user_id, session_id=body.sessionId,
                                         max_bytes=ctx.settings.max_upload_bytes)  # before the transaction
    upload = service.complete(session, principal, session_id=body.sessionId, staged=staged)
    if staged is not None:  # once committed: settle it now (a checkpoint was settled: its staged copy goes)
        after_commit(session, settler.wake if staged.sha256 is None else partial(ctx.blobs.drop_staged, staged.slot))
    return {"success": True, "file": {"size": float(upload.size or 0),
                                      **({"contentType": upload.content_type} if upload.content_type else {})}}


@router.put("/api/storage/uploads/{key:path}", tags=["storage"])
async def put_upload(key: str, request: Request, ctx: Ctx) -> dict[str, Any]:
    """The signed PUT of every upload slot (dataset and model uploads, training checkpoints). The signature is the
    credential. The slot is claimed before a byte is stored (single use, size limit checked up front), the body is
    streamed into the blob store under that limit, then recorded on the slot; a PUT that fails frees the slot."""
    ctx.signer.require("PUT", upload_path(key), request.query_params)

    def transaction(work: Callable[[Session], Any]) -> Any:
        with ctx.db.session() as session:
            return work(session)

    limit = await run_in_threadpool(transaction, lambda s: service.open_slot(
        s, key, ctx.settings, request.headers.get("content-length")))
    try:
        blob = await ctx.blobs.put_stream(request.stream(), max_bytes=limit)
    except BaseException as exc:  # too large, or the client went away: the partial file is already gone
        reason = f"upload failed: {type(exc).__name__}"
        await run_in_threadpool(transaction, lambda s: service.slot_failed(s, key, reason))
        raise
    await run_in_threadpool(transaction, lambda s: service.record_upload(s, key, sha256=blob.sha256,
                                                                         size=blob.size))
    return {"sha256": blob.sha256, "size": blob.size}
