"""Webhooks the official trainer calls while it trains."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from lanner.deps import Ctx, CurrentPrincipal, DbSession, FastPrincipal
from lanner.storage.signing import upload_path
from lanner.training import service
from lanner.training.schemas import MetricsEvent, UploadCheckpointRequest

router = APIRouter(tags=["training"])


@router.post("/api/webhooks/training/metrics")
async def training_metrics(body: MetricsEvent, principal: FastPrincipal, ctx: Ctx) -> dict[str, Any]:
    """Answered once the event is committed; events are group-committed by ``training/ingest.py``."""
    return await ctx.ingest.submit(principal, body)


@router.post("/api/webhooks/models/upload")
def upload_checkpoint(body: UploadCheckpointRequest, principal: CurrentPrincipal, session: DbSession,
                      ctx: Ctx) -> dict[str, Any]:
    staged = service.stage_checkpoint_upload(session, principal, body)
    return {
        "uploadUrl": ctx.signer.sign("PUT", upload_path(staged.path)),
        "gcsPath": staged.path,
        "uploadPath": staged.path,
        "modelId": staged.model_id,
    }
