"""The review API (``/api/datasets/{owner}/{dataset}/review``): the scores' state and the job that computes them,
the scored images in order, the Review queue's next image, and the route the worker hands each chunk's
predictions to. HTTP only: the logic is in ``review.service``, the work in ``review.queue``. Only the dataset's
owner (and its editors) read scores: anyone else gets the 404 of a missing dataset."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.autolabel.worker import TOKEN_HEADER
from lanner.bounds import Count
from lanner.db import after_commit
from lanner.errors import NotFound
from lanner.http.deps import Ctx, DbSession
from lanner.review import service
from lanner.review.queue import ReviewQueue, read_token
from lanner.review.schemas import Chunk, NextBody, ScoresCreate

router = APIRouter(tags=["review"])
REVIEW = "/api/datasets/{owner}/{dataset}/review"


async def get_queue(request: Request) -> ReviewQueue:
    """Set by ``create_app``; async: no I/O."""
    return request.app.state.review


Queue = Annotated[ReviewQueue, Depends(get_queue)]


@router.get(REVIEW, summary="Review scores: fresh, stale or none, and the job computing them")
def scores_status(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    return service.status(session, principal, service.members_dataset(session, principal, owner, dataset))


@router.post(REVIEW, summary="Compute review scores (mistakenness, uniqueness) with a model")
def create_scores(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession, queue: Queue,
                  body: ScoresCreate | None = None) -> dict[str, Any]:
    record = service.members_dataset(session, principal, owner, dataset, write=True)
    job, created = service.request(session, principal, record, body.modelId if body else None)
    if created:
        after_commit(session, queue.wake)
    return {"jobId": job.id}


@router.delete(REVIEW, summary="Cancel the review scores job under way")
def cancel_scores(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession,
                  queue: Queue) -> dict[str, Any]:
    cancelled = service.cancel(session, service.members_dataset(session, principal, owner, dataset, write=True))
    if cancelled:
        after_commit(session, queue.wake)
    return {"cancelled": cancelled}


@router.get(REVIEW + "/images", summary="Scored images, most mistaken (or most unique) first")
def scored_images(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession,
                  sort: Literal["mistakenness", "uniqueness"] = "mistakenness",
                  limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                  offset: Annotated[Count, Query()] = 0) -> dict[str, Any]:
    record = service.members_dataset(session, principal, owner, dataset)
    return service.scores(session, record, sort=sort, limit=limit, offset=offset)


@router.post(REVIEW + "/next", summary="The Review queue's next image (marked reviewed in this pass)")
def review_next(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession,
                body: NextBody | None = None) -> dict[str, Any]:
    record = service.members_dataset(session, principal, owner, dataset, write=True)
    return {"image": service.next_for_review(session, record, restart=bool(body and body.restart))}


@router.post("/api/review/chunks", summary="A worker hands back the predictions of a chunk of images")
def record_chunk(body: Chunk, session: DbSession, ctx: Ctx,
                 token: Annotated[str | None, Header(alias=TOKEN_HEADER, max_length=300)] = None) -> dict[str, Any]:
    """No sign-in: the token the queue signed for this attempt is the credential."""
    claim = read_token(ctx.signer, token)
    if claim is None:
        raise NotFound("review scores attempt not found")
    job = service.worker_job(session, *claim)
    return service.record_chunk(session, ctx, job, [r.model_dump() for r in body.results])
