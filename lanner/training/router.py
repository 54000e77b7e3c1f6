"""Webhooks the official trainer calls while it trains, and ``training.start`` / ``gpu_availability``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from lanner.accounts.dependencies import CurrentPrincipal, FastPrincipal
from lanner.deps import Ctx, DbSession
from lanner.gpus.catalogue import get_catalogue
from lanner.training import launch, service
from lanner.training.dependencies import Runtime
from lanner.training.launch import StartRequest
from lanner.training.schemas import MetricsEvent, UploadCheckpointRequest

router = APIRouter(tags=["training"])


@router.post("/api/webhooks/training/metrics")
async def training_metrics(body: MetricsEvent, principal: FastPrincipal, runtime: Runtime) -> dict[str, Any]:
    """Answered once the event is committed; events are group-committed by ``training/group_commit.py``."""
    return await runtime.writer.submit(principal, body)


@router.post("/api/webhooks/models/upload")
def upload_checkpoint(body: UploadCheckpointRequest, principal: CurrentPrincipal, session: DbSession,
                      ctx: Ctx) -> dict[str, Any]:
    staged = service.stage_checkpoint_upload(session, principal, body)
    return {
        "uploadUrl": ctx.signer.upload_url(staged.path),
        "gcsPath": staged.path,
        "uploadPath": staged.path,
        "modelId": staged.model_id,
    }


# --- launching runs ------------------------------------------------------------------------------

@router.post("/api/training/start")
def start_training(body: StartRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                   runtime: Runtime) -> dict[str, Any]:
    """Validate, estimate, hold credit and queue the run; the supervisor launches it on the executor."""
    return launch.start(session, principal, body, catalogue=get_catalogue(ctx), executor=runtime.executor,
                        executor_name=ctx.settings.executor)


@router.get("/api/training/gpu-availability")
def gpu_availability(runtime: Runtime, managed: str | None = None) -> dict[str, str | None]:
    """High / Medium / Low per offered GPU type from the executor's free capacity; null where none exists.
    Public, like the hosted endpoint (``managed`` is accepted and ignored: everything here is self-managed)."""
    return availability_now(runtime)


def availability_now(runtime: Any) -> dict[str, str | None]:
    capacity = runtime.executor.capacity()
    out: dict[str, str | None] = {}
    for gpu in get_catalogue(runtime.ctx).offered():
        room = capacity.get(gpu.id)
        out[gpu.id] = availability_level(room.free, room.total) if room and room.total else None
    return out


def availability_level(free: int, total: int) -> str:
    if free <= 0:
        return "Low"
    return "High" if free >= max(1, total) / 2 else "Medium"
