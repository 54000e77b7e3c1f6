"""SDK ``datasets.embeddings|create_embeddings|delete_embeddings``, ``images.find_similar_images`` and
``models.find_similar_training_images``, and the embedding worker's signed links (its pages of images and vectors,
the sample and the copy-detection head). HTTP only: the logic is in
``embeddings.service`` and ``embeddings.similar``, the work in ``embeddings.queue`` and ``embeddings.worker``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.bounds import Count
from lanner.db import after_commit
from lanner.embeddings import head, maps, schemas, service, similar, vectors
from lanner.embeddings.jobs import worker_path
from lanner.embeddings.queue import EmbeddingQueue
from lanner.errors import Conflict, PayloadTooLarge
from lanner.http.deps import Ctx, DbSession

router = APIRouter(tags=["embeddings"])
EMBEDDINGS = "/api/datasets/{owner}/{dataset}/embeddings"
MAX_MAP_PAGE = 10_000  # points per datasets.clustering page: 200,000 images in 20 requests
MAX_PAGE_BYTES = 64 * 1024 * 1024  # 1,024 vectors of 4,096 float32 and their digests, with room to spare
MAX_HEAD_BYTES = 40 * 1024 * 1024  # a head on 4,096-number vectors: 16 MB of weights in its first layer


async def get_queue(request: Request) -> EmbeddingQueue:
    """Set by ``create_app``; async: no I/O."""
    return request.app.state.embeddings


Queue = Annotated[EmbeddingQueue, Depends(get_queue)]


@router.get(EMBEDDINGS, summary="datasets.embeddings: analysis status, progress and freshness")
def embeddings_status(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    return service.status(session, principal, owner=owner, slug=dataset)


@router.post(EMBEDDINGS, summary="datasets.create_embeddings: embed the dataset's images",
             description="Queues an embedding job with the model named in the optional body's `modelId` (a Lanner "
             "extension: a model id or `ul://owner/project/model` the caller may read, else 404; 422 without "
             "weights or for a network that cannot embed), which stays the dataset's model until another is "
             "named (`auto`: the server's pick again). Without it: the dataset's named model, else the newest "
             "model trained on the dataset, else the server's best pretrained model for the task (409 when it "
             "has none). A job under way is answered again; images embedded before with the same model are not "
             "embedded again.")
def create_embeddings(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                      queue: Queue, body: schemas.CreateEmbeddings | None = None) -> dict[str, Any]:
    job, created = service.create(session, principal, ctx.settings, owner=owner, slug=dataset,
                                  model_id=body.modelId if body else None)
    if created:
        after_commit(session, queue.wake)
    return {"jobId": job.id}


@router.delete(EMBEDDINGS, summary="datasets.delete_embeddings: cancel the embedding job under way")
def delete_embeddings(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession,
                      queue: Queue) -> dict[str, Any]:
    cancelled = service.cancel(session, principal, owner=owner, slug=dataset)
    if cancelled:
        after_commit(session, queue.wake)
    return {"cancelled": cancelled}


@router.get("/api/datasets/{owner}/{dataset}/images/clustering",
            summary="datasets.clustering: the dataset's map, the 2-D layout of its embeddings, in pages",
            description="Every image of the dataset once across the pages, with its point (`umapX`, `umapY`) and "
            "a `cluster` to colour by; `missing` for an image added since the map was computed, and the header "
            "`X-Lanner-Map-Stale: true` while the map no longer matches the dataset. 409 `no_embeddings` before "
            "`datasets.create_embeddings`; 409 `map_pending` while a large dataset's map is computed.")
def clustering(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx, queue: Queue,
               response: Response, offset: Annotated[Count, Query()] = 0,
               limit: Annotated[int, Query(ge=1, le=MAX_MAP_PAGE)] = MAX_MAP_PAGE) -> dict[str, Any]:
    answer = maps.clustering(session, principal, ctx.settings, owner=owner, slug=dataset, offset=offset,
                             limit=limit)
    if answer is None:
        after_commit(session, queue.wake)
        session.commit()  # the request for the queue outlives this 409
        raise Conflict("the map of this dataset is being computed; ask again in a minute", code="map_pending")
    body, stale = answer
    if stale:
        response.headers["X-Lanner-Map-Stale"] = "true"
    return body


@router.get("/api/images/{image_id}/similar", summary="images.find_similar_images")
def find_similar_images(image_id: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                        includeSourceDataset: Literal["true", "false"] = "false") -> dict[str, Any]:  # noqa: N803
    return similar.similar_images(session, principal, ctx, image_id, include_source=includeSourceDataset == "true")


@router.get("/api/models/{owner}/{project}/{model}/similar-images", summary="models.find_similar_training_images")
def find_similar_training_images(owner: str, project: str, model: str, principal: CurrentPrincipal,
                                 session: DbSession, ctx: Ctx, hashes: str | None = None) -> dict[str, Any]:
    return similar.similar_training_images(session, principal, ctx, owner=owner, project=project, model=model,
                                           hashes=hashes)


@router.get("/api/embeddings/jobs/{job_id}/{slot}/manifest", include_in_schema=False)
def worker_manifest(job_id: str, slot: str, request: Request, session: DbSession, ctx: Ctx,
                    after: str = "", limit: Annotated[int, Query(ge=1, le=vectors.MAX_PAGE)] = 32) -> dict[str, Any]:
    """The worker's next page: images of the job's dataset without a vector, after ``after``, with signed links.
    The signature is the credential; the attempt's token in the path dies with the attempt."""
    ctx.signer.require("GET", worker_path(job_id, slot, "manifest"), request.query_params)
    job = service.worker_job(session, job_id, slot)
    link = ctx.signer.blob_links()
    return {"images": [{"sha256": sha, "url": link(sha, "image")}
                       for sha in vectors.missing_page(session, job, after=after, limit=limit)]}


async def _delivered(request: Request, ctx: Ctx, job_id: str, slot: str, *, what: str, limit: int,
                     store: Any) -> Any:
    """What a worker PUT to one of its signed links (``what``: ``vectors`` or ``head``), read up to ``limit``
    bytes, then ``store(session, job, body)`` in a thread, under the attempt's job."""
    ctx.signer.require("PUT", worker_path(job_id, slot, what), request.query_params)
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            raise PayloadTooLarge(f"a worker's {what} take at most {limit} bytes")

    def in_session() -> Any:
        with ctx.db.session() as session:
            return store(session, service.worker_job(session, job_id, slot), bytes(body))

    return await run_in_threadpool(in_session)


@router.put("/api/embeddings/jobs/{job_id}/{slot}/vectors", include_in_schema=False)
async def worker_vectors(job_id: str, slot: str, request: Request, ctx: Ctx) -> dict[str, Any]:
    """A page of vectors from the worker (``worker.pack``), stored before the worker asks for the next page."""
    return {"stored": await _delivered(request, ctx, job_id, slot, what="vectors", limit=MAX_PAGE_BYTES,
                                       store=vectors.store_page)}


@router.get("/api/embeddings/jobs/{job_id}/{slot}/sample", include_in_schema=False)
def worker_sample(job_id: str, slot: str, request: Request, session: DbSession, ctx: Ctx,
                  limit: Annotated[int, Query(ge=1, le=head.IMAGES)] = head.IMAGES) -> dict[str, Any]:
    """The images the worker trains the vector key's copy-detection head on (``vectors.sample``)."""
    ctx.signer.require("GET", worker_path(job_id, slot, "sample"), request.query_params)
    job = service.worker_job(session, job_id, slot)
    link = ctx.signer.blob_links()
    return {"images": [{"sha256": sha, "url": link(sha, "image")} for sha in vectors.sample(session, job, limit)]}


@router.put("/api/embeddings/jobs/{job_id}/{slot}/head", include_in_schema=False)
async def worker_head(job_id: str, slot: str, request: Request, ctx: Ctx) -> dict[str, Any]:
    """The copy-detection head the worker trained (``head.to_bytes``), kept unless the key has one."""
    return {"kept": await _delivered(request, ctx, job_id, slot, what="head", limit=MAX_HEAD_BYTES,
                                     store=vectors.store_head)}
