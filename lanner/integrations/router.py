"""The SDK's ``storage_integrations.*`` (``/api/integrations/buckets``) and Lanner's bucket datasets: HTTP only,
the logic is in ``service`` (connections), ``importer`` and ``pixels``. Requests to a user's bucket are blocking
network calls, so these are sync routes (FastAPI's thread pool)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.datasets import items
from lanner.datasets import service as dataset_service
from lanner.db import after_commit
from lanner.errors import NotFound
from lanner.http.deps import Ctx, DbSession
from lanner.integrations import jobs, pixels, service
from lanner.integrations.models import BucketImport
from lanner.integrations.queue import BucketImports
from lanner.integrations.schemas import BucketImportRequest, CreateIntegration, DiscoverRequest, UpdateIntegration

router = APIRouter(tags=["integrations"])

Target = Query(max_length=255, description="Bucket or container name")
Prefix = Query(default="", max_length=1024, description="Folder prefix")


@router.get("/api/integrations/buckets")
def list_integrations(principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    return {"integrations": [service.to_json(row) for row in service.list_mine(session, principal)]}


@router.post("/api/integrations/buckets", status_code=201)
def create_integration(body: CreateIntegration, principal: CurrentPrincipal, session: DbSession,
                       ctx: Ctx) -> dict[str, Any]:
    row = service.create(session, ctx.settings, principal, provider=body.provider, credentials=body.credentials,
                         targets=body.targets)
    return service.to_json(row)


@router.post("/api/integrations/buckets/discover")
def discover(body: DiscoverRequest, principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    return {"targets": service.discover(ctx.settings, provider=body.provider, credentials=body.credentials)}


@router.get("/api/integrations/buckets/{id}/objects")
def objects(id: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx, target: str = Target,
            prefix: str = Prefix, cursor: str | None = Query(default=None, max_length=1024)) -> dict[str, Any]:
    row = service.get(session, principal, id)
    return service.objects(ctx.settings, row, target=target, prefix=prefix, cursor=cursor)


@router.get("/api/integrations/buckets/{id}/scan")
def scan(id: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx, target: str = Target,
         prefix: str = Prefix) -> dict[str, Any]:
    """Lanner: image and label files per folder under ``prefix``: what an import would find."""
    row = service.get(session, principal, id)
    return service.scan(ctx.settings, row, target=target, prefix=prefix)


@router.patch("/api/integrations/buckets/{id}")
def update_integration(id: str, body: UpdateIntegration, principal: CurrentPrincipal,
                       session: DbSession) -> dict[str, Any]:
    return service.to_json(service.update(service.get(session, principal, id), processing=body.processing))


@router.delete("/api/integrations/buckets/{id}")
def delete_integration(id: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    service.delete(session, service.get(session, principal, id))
    return {"success": True}


def _bucket_imports(request: Request) -> BucketImports:
    return request.app.state.bucket_imports


@router.post("/api/datasets/{owner}/{dataset}/bucket-imports", status_code=202)
def start_bucket_import(owner: str, dataset: str, body: BucketImportRequest, principal: CurrentPrincipal,
                        session: DbSession, queue: Annotated[BucketImports, Depends(_bucket_imports)]
                        ) -> dict[str, Any]:
    """Lanner: index ``target``/``prefix`` of a connected bucket into the dataset in place (202; the job's
    progress at the GET below). The commit before the answer wakes the queue."""
    record = dataset_service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    integration = service.get(session, principal, body.integrationId)
    if body.target not in integration.targets:
        raise NotFound(f"'{body.target}' is not a target of this storage integration")
    job = jobs.start(session, principal, record, integration, target=body.target, prefix=body.prefix)
    after_commit(session, queue.wake)
    return jobs.to_json(job)


@router.get("/api/datasets/{owner}/{dataset}/bucket-imports/{import_id}")
def bucket_import(owner: str, dataset: str, import_id: str, principal: CurrentPrincipal,
                  session: DbSession) -> dict[str, Any]:
    record = dataset_service.get_dataset(session, principal, owner=owner, slug=dataset)
    job = session.get(BucketImport, import_id)
    if job is None or job.dataset_id != record.id:
        raise NotFound(f"bucket import '{import_id}' not found")
    return jobs.to_json(job)


@router.post("/api/datasets/{owner}/{dataset}/bucket-check")
def bucket_check(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession,
                 ctx: Ctx) -> dict[str, Any]:
    """Lanner: compare every bucket image of the dataset with its object now: the keys changed or deleted
    since import (their images are then refused, never served with other pixels)."""
    record = dataset_service.get_dataset(session, principal, owner=owner, slug=dataset)
    return pixels.recheck(session, ctx.settings, record)


@router.get("/api/images/{image_id}/source")
def image_source(image_id: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx) -> RedirectResponse:
    """Lanner: a bucket image's pixels: a redirect to a presigned URL of the object pinned at import, or 409
    if it changed or was deleted since (``pixels.presigned_url``)."""
    record, item = items.resolve_image(session, principal, image_id)
    row = pixels.source_of(session, record, item.sha256)
    url = pixels.presigned_url(session, ctx.settings, row, ttl=ctx.settings.signed_url_ttl_seconds)
    return RedirectResponse(url, status_code=307)
