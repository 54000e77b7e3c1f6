"""Webhooks the official trainer calls while it trains, ``training.start`` / ``gpu_availability``, and a model's
training job and its cancel (``models.training``, ``models.cancel_training``). HTTP only."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from lanner.accounts.dependencies import CurrentPrincipal, FastPrincipal, get_principal_nonblocking
from lanner.accounts.principal import Principal
from lanner.context import AppContext
from lanner.http.deps import Ctx, DbSession
from lanner.http.direct_route import DirectRoute, json_response, parse_body, served_by
from lanner.projects import service as projects_service
from lanner.training import checkpoints, launch, service, trained_on, views
from lanner.training.capacity import availability, levels
from lanner.training.dependencies import CurrentCatalogue, Runtime, runtime_of
from lanner.training.schemas import MetricsEvent, StartRequest, UploadCheckpointDone, UploadCheckpointRequest

# DirectRoute serves an endpoint marked ``@served_by`` with its handler (the trainer's upload slot) and every
# other route as FastAPI does.
router = APIRouter(tags=["training"], route_class=DirectRoute)
# The trainer's metrics webhook alone, included before every other router (``lanner.app.ROUTERS``): FastAPI
# matches included routers one after another at a few microseconds each, and with the webhook behind ~20 of
# them, finding its route cost a third of the event loop's time under load (docs/profiles/README.md).
webhook_router = APIRouter(tags=["training"], route_class=DirectRoute)


async def _serve_metrics(request: Request) -> Response:
    """What ``training_metrics`` documents, without FastAPI's per-request machinery (``lanner.http.direct_route``):
    the key as ``FastPrincipal`` checks it, the body parsed once as ``MetricsEvent``, the answer encoded once."""
    principal = await get_principal_nonblocking(request)
    body = parse_body(MetricsEvent, await request.body())
    await _settle_named_checkpoint(request.app.state.lanner, principal, body)
    return json_response(await runtime_of(request).writer.submit(principal, body))


async def _settle_named_checkpoint(ctx: AppContext, principal: Principal, body: MetricsEvent) -> None:
    """An event naming a checkpoint the trainer PUT into the bucket: settled (read back, hashed, filed) before the
    event is applied, in a worker thread and outside the group commit, so that promotion finds it recorded."""
    if ctx.blobs.presigns and checkpoints.named_checkpoint(body) is not None:
        await run_in_threadpool(checkpoints.settle_named_checkpoint, ctx.db, ctx.blobs, principal, body)


@webhook_router.post("/api/webhooks/training/metrics")
@served_by(_serve_metrics)
async def training_metrics(body: MetricsEvent, principal: FastPrincipal, runtime: Runtime,
                           ctx: Ctx) -> dict[str, Any]:
    """Answered once the event is committed; events are group-committed by ``training/group_commit.py``."""
    await _settle_named_checkpoint(ctx, principal, body)
    return await runtime.writer.submit(principal, body)


def _upload_slot(session: Session, principal: Principal, body: UploadCheckpointRequest, ctx: AppContext,
                 ) -> dict[str, Any]:
    """A checkpoint slot: with a store that presigns, the bucket's presigned PUT for every caller (the bytes never
    pass through an API host), else Lanner's signed route. ``direct: true`` in the answer, only for a caller that
    asked (Lanner's worker), tells it to confirm the upload (``upload_checkpoint_complete``); the unchanged
    trainer names the file in ``checkpoint_saved`` / ``training_complete`` instead, which settles it
    (``checkpoints.settle_named_checkpoint``)."""
    staged = checkpoints.stage_checkpoint_upload(session, principal, body)
    url, direct = ctx.signer.worker_upload_url(staged.path)
    return {
        "uploadUrl": url,
        "gcsPath": staged.path,
        "uploadPath": staged.path,
        "modelId": staged.model_id,
        **({"direct": True} if direct and body.direct else {}),
    }


async def _serve_upload_slot(request: Request) -> Response:
    """What ``upload_checkpoint`` documents, in one thread hop instead of one per sync dependency (the key, the
    session in and out, the endpoint): the trainer waits for this slot at the end of training (``on_train_end``
    uploads ``best.pt`` before it exits). The key as ``FastPrincipal`` checks it, the body parsed once as
    ``UploadCheckpointRequest``, the slot staged and committed before the answer, as the endpoint does."""
    principal = await get_principal_nonblocking(request)
    body = parse_body(UploadCheckpointRequest, await request.body())
    ctx: AppContext = request.app.state.lanner

    def stage() -> dict[str, Any]:
        with ctx.db.session() as session:
            return _upload_slot(session, principal, body, ctx)

    return json_response(await run_in_threadpool(stage))


@router.post("/api/webhooks/models/upload")
@served_by(_serve_upload_slot)
def upload_checkpoint(body: UploadCheckpointRequest, principal: CurrentPrincipal, session: DbSession,
                      ctx: Ctx) -> dict[str, Any]:
    return _upload_slot(session, principal, body, ctx)


@router.post("/api/webhooks/models/upload/complete")
async def upload_checkpoint_complete(body: UploadCheckpointDone, principal: FastPrincipal,
                                     ctx: Ctx) -> dict[str, Any]:
    """The worker PUT a direct slot's checkpoint into the bucket: the server reads it back, hashes it and records
    it on the slot (``checkpoints.settle_checkpoint_upload``). No request-wide session (``FastPrincipal``): no
    transaction is open while hundreds of megabytes are read back."""
    blob = await run_in_threadpool(checkpoints.settle_checkpoint_upload, ctx.db, ctx.blobs, principal, body)
    return {"uploadPath": body.uploadPath, "sha256": blob.sha256, "size": blob.size}


# --- launching runs ------------------------------------------------------------------------------

@router.post("/api/training/start")
def start_training(body: StartRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                   runtime: Runtime, catalogue: CurrentCatalogue) -> dict[str, Any]:
    """Validate, estimate, hold credit and queue the run; the supervisor launches it on the executor."""
    launch.prepare(session, principal, body.trainArgs)
    return launch.start(session, principal, body, catalogue=catalogue, executor=runtime.executor,
                        executor_name=ctx.settings.executor)


@router.get("/api/training/gpu-availability")
def gpu_availability(runtime: Runtime, catalogue: CurrentCatalogue, session: DbSession, managed: str | None = None,
                     detail: bool = False) -> dict[str, Any]:
    """High / Medium / Low per offered GPU type (free now; on demand from a pool; queued); null where none can
    run. Public, like the hosted endpoint (``managed`` is accepted and ignored: everything here is self-managed).
    ``detail=true`` (Lanner): per type ``{level, text, startupSeconds, queuedBehind}``."""
    found = availability(session, runtime.executor, catalogue)
    return {gpu: entry.as_json() for gpu, entry in found.items()} if detail else levels(found)


# --- a model's training job ----------------------------------------------------------------------

@router.get("/api/models/{owner}/{project}/{model}/training")
def model_training(owner: str, project: str, model: str, principal: CurrentPrincipal, session: DbSession,
                   catalogue: CurrentCatalogue) -> dict[str, Any]:
    record = projects_service.get_model(session, principal, owner=owner, project=project, model=model)
    return {"job": views.job_view(session, record, catalogue=catalogue)}


@router.delete("/api/models/{owner}/{project}/{model}/training")
def cancel_model_training(owner: str, project: str, model: str, principal: CurrentPrincipal,
                          session: DbSession) -> dict[str, Any]:
    record = projects_service.get_model(session, principal, owner=owner, project=project, model=model, write=True)
    service.cancel_training(session, record)
    return {"success": True, "status": "cancelled"}


@router.get("/api/datasets/{owner}/{dataset}/models")
def dataset_models(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    """The models trained on a dataset that the caller may read (``training/trained_on.py``)."""
    return trained_on.models_trained_on(session, principal, owner=owner, slug=dataset)
