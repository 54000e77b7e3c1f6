"""SDK ``exports.*`` endpoints (``/api/models/{owner}/{project}/{model}/exports``) and the mobile import links.
HTTP only: the logic is in ``exports.service``, the work in ``exports.queue``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.bounds import PageSize
from lanner.db import after_commit
from lanner.exports import jobs, service
from lanner.exports.queue import ExportQueue
from lanner.exports.schemas import REGION, ExportCreate, MobileResolve, StatusName, export_item
from lanner.gpus.catalogue import get_catalogue
from lanner.http.deps import Ctx, DbSession
from lanner.storage.references import collect_after_commit

router = APIRouter(tags=["exports"])
EXPORTS = "/api/models/{owner}/{project}/{model}/exports"


async def get_queue(request: Request) -> ExportQueue:
    """Set by ``create_app``; async: no I/O."""
    return request.app.state.exports


Queue = Annotated[ExportQueue, Depends(get_queue)]


@router.post(EXPORTS, status_code=201)
def create_export(owner: str, project: str, model: str, body: ExportCreate, principal: CurrentPrincipal,
                  session: DbSession, ctx: Ctx, queue: Queue, response: Response) -> dict[str, Any]:
    """Queue an export; the same export asked again (same weights, format and arguments) answers the existing
    one (200 instead of 201), finished or not."""
    job, reused = service.request_export(session, principal, owner=owner, project=project, model=model, body=body,
                                         catalogue=get_catalogue(ctx.settings), executor=queue.executor)
    if reused:
        response.status_code = 200
    else:
        after_commit(session, queue.wake)
    status = jobs.QUEUED if job.status == jobs.STARTING else job.status
    answer: dict[str, Any] = {"id": job.id, "format": job.format, "status": status, "region": REGION}
    if job.gpu_type != "cpu":
        answer["gpuType"] = job.gpu_type
    return answer


@router.get(EXPORTS)
def list_exports(owner: str, project: str, model: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                 status: StatusName | None = None, limit: Annotated[PageSize | None, Query(le=100)] = None,
                 ) -> dict[str, Any]:
    rows = service.list_exports(session, principal, owner=owner, project=project, model=model, status=status,
                                limit=limit)
    return {"exports": [export_item(job, ctx.signer) for job in rows], "region": REGION}


@router.get(EXPORTS + "/{export_id}")
def retrieve_export(owner: str, project: str, model: str, export_id: str, principal: CurrentPrincipal,
                    session: DbSession, ctx: Ctx) -> dict[str, Any]:
    job = service.get_export(session, principal, owner=owner, project=project, model=model, export_id=export_id)
    return {"export": export_item(job, ctx.signer)}


@router.delete(EXPORTS + "/{export_id}")
def delete_export(owner: str, project: str, model: str, export_id: str, principal: CurrentPrincipal,
                  session: DbSession, ctx: Ctx, queue: Queue) -> dict[str, Any]:
    """Cancel an active export (its worker is stopped) or delete a finished one (its file is freed once nothing
    else refers to it)."""
    job = service.get_export(session, principal, owner=owner, project=project, model=model, export_id=export_id,
                             write=True)
    action, digest = service.delete_export(session, job)
    if action == "cancelled":
        after_commit(session, queue.wake)
    elif digest:
        collect_after_commit(session, ctx, {digest})
    return {"success": True, "action": action}


@router.post(EXPORTS + "/{export_id}/mobile")
def mobile_link(owner: str, project: str, model: str, export_id: str, principal: CurrentPrincipal,
                session: DbSession, ctx: Ctx) -> dict[str, Any]:
    """A 24-hour bearer link to a completed coreml, coreai or litert export (anyone with it may download)."""
    job = service.get_export(session, principal, owner=owner, project=project, model=model, export_id=export_id,
                             write=True)
    return service.mobile_link(job, ctx.signer)


@router.post("/api/mobile/models/{export_id}")
def resolve_mobile(export_id: str, body: MobileResolve, session: DbSession, ctx: Ctx) -> dict[str, Any]:
    """No sign-in: the signed fragment of a mobile import link is the credential."""
    return service.resolve_mobile(session, export_id, expires=body.expires, signature=body.signature,
                                  signer=ctx.signer)
