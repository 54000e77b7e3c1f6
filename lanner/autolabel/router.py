"""SDK ``datasets.batch`` / ``create_batch`` / ``delete_batch`` (``/api/datasets/{owner}/{dataset}/predict/batch``),
the preview the dataset page draws, and the route a worker hands each chunk's labels to. HTTP only: the logic is
in ``autolabel.service``, the work in ``autolabel.queue``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.autolabel import blur, service, views
from lanner.autolabel.queue import AutolabelQueue, read_token
from lanner.autolabel.schemas import BatchCreate, Chunk
from lanner.datasets import service as datasets_service
from lanner.db import after_commit
from lanner.errors import NotFound
from lanner.http.deps import Ctx, DbSession
from lanner.inference.predictor import Predictor
from lanner.storage.references import collect_after_commit

router = APIRouter(tags=["datasets"])
BATCH = "/api/datasets/{owner}/{dataset}/predict/batch"


async def get_queue(request: Request) -> AutolabelQueue:
    """Set by ``create_app``; async: no I/O."""
    return request.app.state.autolabel


async def get_predictor(request: Request) -> Predictor:
    return request.app.state.inference


Queue = Annotated[AutolabelQueue, Depends(get_queue)]
Engine = Annotated[Predictor, Depends(get_predictor)]


@router.get(BATCH, summary="Get image-processing run status")
def batch(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx) -> dict[str, Any]:
    record = datasets_service.get_dataset(session, principal, owner=owner, slug=dataset)
    return views.batch_view(session, record, ctx.signer.blob_links())


@router.post(BATCH, summary="Auto-annotate images or blur faces")
def create_batch(owner: str, dataset: str, body: BatchCreate, principal: CurrentPrincipal, session: DbSession,
                 ctx: Ctx, queue: Queue, engine: Engine) -> dict[str, Any]:
    """Sync on purpose: a preview runs the model on FastAPI's threadpool, never on the event loop."""
    record = datasets_service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    job = service.request_run(session, principal, ctx, record, body, predictor=engine)
    if not job.preview:
        after_commit(session, queue.wake)
    return {"jobId": job.id}


@router.delete(BATCH, summary="Cancel or dismiss an image-processing run")
def delete_batch(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession, queue: Queue, ctx: Ctx,
                 previewJobId: Annotated[str | None, Query(max_length=64)] = None) -> dict[str, Any]:
    """A dismissed blur preview's prepared images are collected (``blur.forget_preview``)."""
    record = datasets_service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    answer = views.stop_or_dismiss(session, record, previewJobId)
    if answer["action"] == "cancelled":
        after_commit(session, queue.wake)
    elif answer["action"] == "dismissed":
        collect_after_commit(session, ctx, blur.forget_preview(session, answer["jobId"]))
    return answer


@router.get(BATCH + "/preview", summary="The labels a preview run proposed, per image")
def preview(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
            jobId: Annotated[str, Query(max_length=64)]) -> dict[str, Any]:
    """A reader's: the model's proposals on images the caller may already see (an editor made the preview)."""
    record = datasets_service.get_dataset(session, principal, owner=owner, slug=dataset)
    return views.preview_view(session, record, jobId, ctx.signer.blob_links())


@router.post("/api/autolabel/chunks", summary="A worker hands back the labels of a chunk of images")
def record_chunk(body: Chunk, session: DbSession, ctx: Ctx,
                 token: Annotated[str | None, Header(alias="X-Lanner-Autolabel-Token", max_length=300)] = None
                 ) -> dict[str, Any]:
    """No sign-in: the token the queue signed for this attempt is the credential."""
    claim = read_token(ctx.signer, token)
    if claim is None:
        raise NotFound("auto-annotation attempt not found")
    job = service.worker_job(session, *claim)
    return service.record_chunk(session, ctx, job, [r.model_dump() for r in body.results])
