"""SDK ``datasets.*`` endpoints for clones, versions and archives: HTTP only, the logic is in ``versions`` and
``archives``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.bounds import Count, Cursor, RowId
from lanner.datasets import archives, service, versions
from lanner.datasets.schemas import CloneRequest, CreateExportRequest, RestoreRequest, UpdateExportRequest
from lanner.http.deps import Ctx, DbSession
from lanner.integrations import pixels
from lanner.training import service as training_service

router = APIRouter(tags=["datasets"])


@router.post("/api/datasets/{owner}/{dataset}/clone", status_code=201)
def clone(owner: str, dataset: str, body: CloneRequest, principal: CurrentPrincipal,
          session: DbSession) -> dict[str, Any]:
    source = service.get_dataset(session, principal, owner=owner, slug=dataset)
    return versions.clone(session, principal, source, name=body.name, slug=body.dataset,
                          description=body.description, visibility=body.visibility, owner=body.owner,
                          version=body.version)


@router.get("/api/datasets/{owner}/{dataset}/export")
def export(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
           v: RowId | None = None,
           format: str = Query(default="ndjson", description="Lanner: ndjson, yolo (zip) or coco (JSON)"),
           ) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset)
    pinned = training_service.pinned_dataset_version_id(session, principal)
    return archives.export(session, record, version=v, pinned_version_id=pinned, kind=format, owner=owner.lower(),
                          blobs=ctx.blobs, signer=ctx.signer, settings=ctx.settings,
                          image_url=pixels.export_urls(session, ctx.settings, record))


@router.post("/api/datasets/{owner}/{dataset}/export")
def create_version(owner: str, dataset: str, body: CreateExportRequest, principal: CurrentPrincipal,
                   session: DbSession, ctx: Ctx) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    version, reused = service.create_version(session, record, body.description)
    response: dict[str, Any] = {"version": version.version, "reused": reused}
    if body.download:
        response["downloadUrl"] = archives.export_version(session, record, version, blobs=ctx.blobs,
                                                         signer=ctx.signer, settings=ctx.settings,
                                                         owner=owner.lower(),
                                                         image_url=pixels.export_urls(session, ctx.settings, record))
    return response


@router.patch("/api/datasets/{owner}/{dataset}/export")
def describe_version(owner: str, dataset: str, body: UpdateExportRequest, principal: CurrentPrincipal,
                     session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    versions.get_version(session, record, body.version).description = body.description
    return {"ok": True}


@router.post("/api/datasets/{owner}/{dataset}/restore")
def restore(owner: str, dataset: str, body: RestoreRequest, principal: CurrentPrincipal,
            session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    version = versions.restore_version(session, record, body.version)
    return {"version": version.version, "imageCount": service.counts(session, record.manifest_id)["images"]}


@router.get("/api/datasets/{owner}/{dataset}/versions/compare")
def compare(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession,
            base: Annotated[Count, Query(description="version number; 0 = the current, unversioned content")],
            head: Count = 0, cursor: Cursor | None = None) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset)
    return versions.compare(session, record, base=base, head=head, cursor=cursor)
