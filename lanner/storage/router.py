"""Lanner's signed download route: the signature is the credential (a stand-in for cloud storage links), and the
bytes must still belong to something.
Signed uploads land in ``lanner.uploads.router``, which knows every kind of upload slot."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse, StreamingResponse

from lanner.errors import NotFound
from lanner.http.deps import Ctx
from lanner.storage.references import is_referenced
from lanner.storage.signing import blob_path

router = APIRouter(tags=["storage"])


@router.get("/api/storage/blobs/{sha256}/{filename}")
def get_blob(sha256: str, filename: str, request: Request, ctx: Ctx) -> Any:
    """A link dies with what it points at: bytes nothing refers to any more (a purged dataset's images, an
    expired upload) answer 404 at once, even before the collector has deleted them. Read without the write lock
    (``Database.read_session``): a trainer fetches a whole dataset through this route at once."""
    ctx.signer.require("GET", blob_path(sha256, filename), request.query_params)
    with ctx.db.read_session() as session:
        referenced = is_referenced(session, sha256)
    if not referenced:
        raise NotFound("file not found")
    try:
        path = ctx.blobs.local_path(sha256)  # the one use of a path: sendfile
    except ValueError:
        raise NotFound("file not found") from None
    if path is not None:
        return FileResponse(path, filename=filename, media_type="application/octet-stream")
    if not ctx.blobs.exists(sha256):
        return _elsewhere(sha256, ctx)
    return StreamingResponse(ctx.blobs.iter_bytes(sha256), media_type="application/octet-stream")


def _elsewhere(sha256: str, ctx: Any) -> RedirectResponse:
    """Bytes referenced but not held here (an image indexed in place in a user's bucket): a redirect to where a
    registered locator says they are, checked by it first; 404 when none knows them."""
    with ctx.db.session() as session:  # a locator records what it found (a changed object)
        for locate in ctx.pixel_locators:
            url = locate(session, sha256, ctx.settings.signed_url_ttl_seconds)
            if url is not None:
                return RedirectResponse(url, status_code=307)
    raise NotFound("file not found")
