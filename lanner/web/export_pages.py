"""The model page's Export section: its fragment (the model's exports, polled by htmx every 2 s while one is
queued or running) and its form, one button per format this server can build. The form posts normally (a
redirect back to the model page with a message) and calls ``exports.service.request_export``, what
``exports.create`` calls: the same checks, the same job, the same queue. Anyone who may read the model sees the
list and its download links; an editor of the workspace may start an export (``teams.permissions``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRouter
from pydantic import ValidationError

from lanner.db import after_commit
from lanner.errors import LannerError
from lanner.exports import jobs, service
from lanner.exports import views as export_views
from lanner.exports.schemas import ExportCreate
from lanner.gpus.catalogue import get_catalogue
from lanner.http.deps import Ctx, DbSession
from lanner.projects import service as projects_service
from lanner.web import paths  # noqa: F401  (paths registers the {owner:owner} convertor)
from lanner.web.templating import PageUser, redirect, render

router = APIRouter(include_in_schema=False)
MODEL = "/{owner:owner}/{project}/{model}"


@router.get(MODEL + "/exports", response_class=HTMLResponse)
def section(request: Request, owner: str, project: str, model: str, user: PageUser, session: DbSession,
            ctx: Ctx) -> Response:
    """The exports list alone (what htmx polls; the model page includes the same fragment)."""
    record = projects_service.get_model(session, user, owner=owner, project=project, model=model)
    return render(request, "_exports.html", {
        "exports": export_views.section(session, user, record, owner=owner, project=project, signer=ctx.signer),
        "owner": owner.lower(), "project_slug": project, "model": record}, user=user)


@router.post(MODEL + "/exports")
def create(request: Request, owner: str, project: str, model: str, user: PageUser, session: DbSession, ctx: Ctx,
           format: Annotated[str, Form(max_length=20)] = "onnx") -> Response:
    record = projects_service.get_model(session, user, owner=owner, project=project, model=model, write=True)
    url = f"/{owner.lower()}/{project}/{record.slug}#exports"
    queue = request.app.state.exports
    try:
        body = ExportCreate(format=format)  # type: ignore[arg-type]  (checked here: a 422 is a message)
        job, reused = service.request_export(session, user, owner=owner, project=project, model=record.slug,
                                             body=body, catalogue=get_catalogue(ctx.settings),
                                             executor=queue.executor)
    except ValidationError:
        return redirect(request, url, f"cannot export: '{format[:20]}' is not an export format", kind="error")
    except LannerError as error:
        return redirect(request, url, f"cannot export: {error.message}", kind="error")
    name = export_views.label(job.format)
    if reused:
        state = "exists already: download it below" if job.status == jobs.COMPLETED else "is already under way"
        return redirect(request, url, f"This {name} export {state}.")
    after_commit(session, queue.wake)
    return redirect(request, url, f"Exporting to {name}: it is listed below, with its download link once done.")
