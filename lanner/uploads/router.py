"""SDK ``upload.*`` endpoints (``/api/upload/...``): HTTP only, the logic is in ``uploads.service``.

``signed-url`` and ``complete`` are called once each per file a client uploads into a bucket, around a PUT that
never passes through Lanner: they are served by direct handlers (``lanner.http.direct_route``), in one thread
hop each instead of one per sync dependency (the key, the session in and out, the endpoint), and API clients
skip the middlewares that do nothing for them (``FastLane``). The endpoints below document the routes and stay
correct implementations of them; both paths share ``_signed_url`` / ``_complete``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from lanner.accounts.dependencies import CurrentPrincipal, get_principal_nonblocking
from lanner.accounts.principal import Principal
from lanner.context import AppContext
from lanner.db import after_commit, set_actor
from lanner.http.deps import Ctx, DbSession
from lanner.http.direct_route import DirectRoute, json_response, read_body, served_by
from lanner.storage import upload_sessions
from lanner.storage.signing import upload_path
from lanner.uploads import service
from lanner.uploads.schemas import SignedUrlRequest, UploadCompleteRequest
from lanner.uploads.settle import UploadSettler

# DirectRoute serves the endpoints marked ``@served_by`` with their handlers, every other route as FastAPI does.
router = APIRouter(tags=["datasets"], route_class=DirectRoute)


async def get_settler(request: Request) -> UploadSettler:
    return request.app.state.upload_settler


Settler = Annotated[UploadSettler, Depends(get_settler)]


def _signed_url(session: Session, principal: Principal, body: SignedUrlRequest, ctx: AppContext) -> dict[str, Any]:
    return service.signed_url(session, principal, signer=ctx.signer, blobs=ctx.blobs, settings=ctx.settings,
                              asset_type=body.assetType, asset_id=body.assetId, filename=body.filename,
                              content_type=body.contentType, total_bytes=body.totalBytes)


def _find_staged(principal: Principal, body: UploadCompleteRequest,
                 ctx: AppContext) -> upload_sessions.Staged | None:
    """The HEAD of the staged object, before the transaction: no write lock is held while the bucket answers."""
    return upload_sessions.find_staged(ctx.db, ctx.blobs, owner_id=principal.user_id, session_id=body.sessionId,
                                       max_bytes=ctx.settings.max_upload_bytes)


def _complete(session: Session, principal: Principal, body: UploadCompleteRequest, ctx: AppContext,
              settler: UploadSettler, staged: upload_sessions.Staged | None) -> dict[str, Any]:
    upload = service.complete(session, principal, session_id=body.sessionId, staged=staged)
    if staged is not None:  # once committed: settle it now (a checkpoint was settled: its staged copy goes)
        after_commit(session, settler.wake if staged.sha256 is None else partial(ctx.blobs.drop_staged, staged.slot))
    return {"success": True, "file": {"size": float(upload.size or 0),
                                      **({"contentType": upload.content_type} if upload.content_type else {})}}


async def _serve_signed_url(request: Request) -> Response:
    """What ``signed_url`` documents: the key as ``CurrentPrincipal`` checks it (a cached key without a thread
    hop), the body read once as ``SignedUrlRequest`` (``read_body``: as FastAPI reads it), then one hop for the
    transaction, committed before the answer as the endpoint's is."""
    principal = await get_principal_nonblocking(request)
    body = await read_body(SignedUrlRequest, request)
    ctx: AppContext = request.app.state.lanner

    def work() -> dict[str, Any]:
        with ctx.db.session() as session:
            set_actor(session, principal.user_id)
            return _signed_url(session, principal, body, ctx)

    return json_response(await run_in_threadpool(work))


async def _serve_complete(request: Request) -> Response:
    """What ``upload_complete`` documents, as ``_serve_signed_url`` does: the HEAD, then the transaction, in
    one hop."""
    principal = await get_principal_nonblocking(request)
    body = await read_body(UploadCompleteRequest, request)
    ctx: AppContext = request.app.state.lanner
    settler: UploadSettler = request.app.state.upload_settler

    def work() -> dict[str, Any]:
        staged = _find_staged(principal, body, ctx)
        with ctx.db.session() as session:
            set_actor(session, principal.user_id)
            return _complete(session, principal, body, ctx, settler, staged)

    return json_response(await run_in_threadpool(work))


@router.post("/api/upload/signed-url")
@served_by(_serve_signed_url)
def signed_url(body: SignedUrlRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx) -> dict[str, Any]:
    return _signed_url(session, principal, body, ctx)


@router.post("/api/upload/complete")
@served_by(_serve_complete)
def upload_complete(body: UploadCompleteRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                    settler: Settler) -> dict[str, Any]:
    staged = _find_staged(principal, body, ctx)  # before the transaction
    return _complete(session, principal, body, ctx, settler, staged)


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
