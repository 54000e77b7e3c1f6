"""The SDK's ``storage_integrations.*`` (``/api/integrations/buckets``) and Lanner's bucket datasets: HTTP only,
the logic is in ``service`` (connections), ``importer`` and ``pixels``. Requests to a user's bucket are blocking
network calls, so these are sync routes (FastAPI's thread pool)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.http.deps import Ctx, DbSession
from lanner.integrations import service
from lanner.integrations.schemas import CreateIntegration, DiscoverRequest, UpdateIntegration

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
