"""The model page's endpoints section: its fragment (the deployments table, polled by htmx every 3 s while one is
changing state, else every 15 s) and its forms: deploy the model, stop, start, delete. Each form posts normally
(a redirect back to the model page with a message) and calls the same service as ``deployments.*``; the
"try it" panel calls the endpoint's own predict from the browser (``static/deployments.js``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from lanner.db import after_commit
from lanner.deployments import service
from lanner.deployments import views as deployment_views
from lanner.deployments.runtime import Endpoints
from lanner.deployments.schemas import DeploymentCreate
from lanner.errors import LannerError
from lanner.http.deps import Ctx, DbSession
from lanner.projects import service as projects_service
from lanner.web import paths  # noqa: F401  (paths registers the {owner:owner} convertor)
from lanner.web.templating import PageUser, redirect, render
from lanner.workflows import views as workflow_views

router = APIRouter(include_in_schema=False)
MODEL = "/{owner:owner}/{project}/{model}"


def _model(session: Any, user: Any, owner: str, project: str, model: str) -> Any:
    return projects_service.get_model(session, user, owner=owner, project=project, model=model, write=True)


@router.get(MODEL + "/deployments", response_class=HTMLResponse)
def section(request: Request, owner: str, project: str, model: str, user: PageUser, session: DbSession,
            ctx: Ctx) -> Response:
    """The deployments table alone (what htmx polls; the model page includes the same fragment)."""
    record = _model(session, user, owner, project, model)
    deploy = deployment_views.section(session, user, record, settings=ctx.settings)
    workflow_views.annotate_rows(session, record.owner_id, deploy["rows"], request.app.state.workflows.clock())
    return render(request, "_deployments.html", {
        "deploy": deploy, "owner": owner.lower(),
        "project_slug": project, "model": record}, user=user)


@router.post(MODEL + "/deployments")
def create(request: Request, owner: str, project: str, model: str, user: PageUser, session: DbSession, ctx: Ctx,
           endpoints: Endpoints, name: Annotated[str, Form(max_length=100)] = "",
           region: Annotated[str, Form(max_length=40)] = "us-central1", cpu: Annotated[int, Form()] = 1,
           memory: Annotated[int, Form()] = 2) -> Response:
    record = _model(session, user, owner, project, model)
    url = f"/{owner.lower()}/{project}/{record.slug}#deployments"
    try:
        body = DeploymentCreate(project=project, model=record.slug, deployment=name or f"{record.slug}-endpoint",
                                name=name or f"{record.slug}-endpoint", region=region, cpu=cpu, memoryGi=memory)
        created = service.create_deployment(session, user, owner=owner, body=body, settings=ctx.settings)
    except LannerError as error:
        return redirect(request, url, error.message, kind="error")
    except ValueError as error:  # a form value outside the SDK's choices (cpu 3, memory 5)
        return redirect(request, url, f"cannot deploy: {str(error).splitlines()[0][:200]}", kind="error")
    after_commit(session, endpoints.changed)
    return redirect(request, url, f"Deploying {created.slug} with {created.runtime}: it is ready in a few seconds.")


def _act(request: Request, session: Any, user: Any, owner: str, project: str, model: str, deployment: str,
         endpoints: Any, act: Any) -> Response:
    record = _model(session, user, owner, project, model)
    found = service.get_deployment(session, user, owner=owner, deployment=deployment, action="train")
    url = f"/{owner.lower()}/{project}/{record.slug}#deployments"
    try:
        message = act(found)
    except LannerError as error:
        return redirect(request, url, error.message, kind="error")
    after_commit(session, endpoints.changed)
    return redirect(request, url, message)


@router.post(MODEL + "/deployments/{deployment}/stop")
def stop(request: Request, owner: str, project: str, model: str, deployment: str, user: PageUser,
         session: DbSession, endpoints: Endpoints) -> Response:
    return _act(request, session, user, owner, project, model, deployment, endpoints, lambda d: (
        f"{d.slug}: {service.stop(session, d, reason='stopped by its owner')[1]}"))


@router.post(MODEL + "/deployments/{deployment}/start")
def start(request: Request, owner: str, project: str, model: str, deployment: str, user: PageUser,
          session: DbSession, endpoints: Endpoints) -> Response:
    return _act(request, session, user, owner, project, model, deployment, endpoints,
                lambda d: f"{d.slug}: {service.start(session, d)[1]}")


@router.post(MODEL + "/deployments/{deployment}/delete")
def delete(request: Request, owner: str, project: str, model: str, deployment: str, user: PageUser,
           session: DbSession, endpoints: Endpoints) -> Response:
    def act(d: Any) -> str:
        slug = d.slug
        service.delete_deployment(session, d)
        return f"{slug} deleted: its process is being shut down."

    return _act(request, session, user, owner, project, model, deployment, endpoints, act)
