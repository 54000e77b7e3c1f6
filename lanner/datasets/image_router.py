"""SDK ``images.*`` endpoints and the image lists of ``datasets.*``: HTTP only, the logic is in ``listing``
(reads) and ``service`` (label and split edits)."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Body, Query, Response
from starlette.concurrency import run_in_threadpool

from lanner.accounts.dependencies import CurrentPrincipal, FastPrincipal
from lanner.bounds import BigCount, Cursor, PageSize
from lanner.datasets import adopt, items, listing, service
from lanner.datasets.schemas import AdoptImagesRequest, BulkSplitRequest, ImageIdsRequest
from lanner.http.deps import Ctx, DbSession

router = APIRouter(tags=["datasets"])


@router.get("/api/datasets/{owner}/{dataset}/images", response_model=dict[str, Any])
async def list_images(owner: str, dataset: str, principal: FastPrincipal, ctx: Ctx, limit: PageSize = 50,
                      offset: BigCount = 0, cursor: Cursor | None = None, includeTotal: bool = True,
                      split: str | None = None, hasError: bool | None = None, hasLabel: bool | None = None,
                      classIds: str | None = None, search: str | None = None, q: str | None = None,
                      issue: str | None = Query(default=None,
                                                description="Lanner: only images with this health issue"),
                      sort: str = "name", includeThumbnails: bool = True, includeImageUrls: bool = False,
                      includeLabels: bool = False) -> Response:
    """The SDK pages through a dataset with this: one thread hop for the whole request (session, dataset,
    page and JSON), where sync dependencies took one each, and the body written by orjson, not validated
    against ``dict[str, Any]`` and encoded again."""
    def page() -> bytes:
        with ctx.db.session() as session:
            record = service.get_dataset(session, principal, owner=owner, slug=dataset)
            body = listing.list_images(
                session, record, signer=ctx.signer, limit=limit, offset=offset, cursor=cursor,
                include_total=includeTotal, split=split, has_error=hasError, has_label=hasLabel, class_ids=classIds,
                text=search or q, issue=issue, sort=sort, thumbnails=includeThumbnails, urls=includeImageUrls,
                labels=includeLabels)
        return orjson.dumps(body)

    return Response(await run_in_threadpool(page), media_type="application/json")


@router.post("/api/datasets/{owner}/{dataset}/images")
def selected_images(owner: str, dataset: str, body: ImageIdsRequest, principal: CurrentPrincipal,
                    session: DbSession, ctx: Ctx, includeThumbnails: bool = True, includeImageUrls: bool = False,
                    includeLabels: bool = False) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset)
    return listing.selected_images(session, record, body.imageIds, signer=ctx.signer, thumbnails=includeThumbnails,
                                   urls=includeImageUrls, labels=includeLabels)


@router.get("/api/images/{image_id}")
def retrieve_image(image_id: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    return listing.image_detail(session, principal, image_id)


# The bulk routes come before ``/api/images/{image_id}``: the first match wins.
@router.delete("/api/images/bulk")
def delete_images_bulk(principal: CurrentPrincipal, session: DbSession,
                       body: ImageIdsRequest = Body(...)) -> dict[str, Any]:
    deleted = items.delete_images(session, principal, body.imageIds)
    return {"success": True, "deletedCount": len(deleted), "deletedImageIds": deleted}


@router.patch("/api/images/bulk")
def update_images_bulk(body: BulkSplitRequest, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    modified, skipped = items.move_images(session, principal, body.imageIds, body.split)
    return {"success": True, "modifiedCount": modified, "skippedCount": skipped, "targetSplit": body.split}


@router.patch("/api/images/{image_id}")
def update_image(image_id: str, principal: CurrentPrincipal, session: DbSession,
                 body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    return items.update_image(session, principal, image_id, body)


@router.delete("/api/images/{image_id}")
def delete_image(image_id: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    return {"success": True, "deletedImageId": image_id,
            "deletedCount": items.delete_image(session, principal, image_id)}


@router.post("/api/images/urls")
def image_urls(body: ImageIdsRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx) -> dict[str, Any]:
    return listing.image_urls(session, principal, body.imageIds, signer=ctx.signer)


@router.post("/api/datasets/{owner}/{dataset}/images/adopt")
def adopt_images(owner: str, dataset: str, body: AdoptImagesRequest, principal: CurrentPrincipal,
                 session: DbSession) -> dict[str, int]:
    """Images of other datasets added here by reference (``datasets/adopt.py``)."""
    target = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    return {"adopted": adopt.adopt_images(session, principal, target, body.imageIds, release=body.release,
                                          class_mapping=body.classMapping)}
