"""Webhooks the official trainer calls while it trains."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from lanner.deps import Ctx, CurrentPrincipal, DbSession
from lanner.storage.signing import upload_path
from lanner.training import service
from lanner.training.schemas import MetricsEvent, UploadCheckpointRequest

router = APIRouter(tags=["training"])


@router.post("/api/webhooks/training/metrics")
def training_metrics(body: MetricsEvent, principal: CurrentPrincipal, session: DbSession,
                     ctx: Ctx) -> dict[str, Any]:
    event_ctx = service.EventContext(session, principal, ctx.settings.public_url)
    return service.handle_event(event_ctx, body)


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
