"""The workspace's Workflows page (``/workflows``, a team's with ``?owner=``: ``web.workspaces``, 404 elsewhere):
each saved workflow (``agents.save``, or a deployment's collect form) with its template, deployment, target
dataset, whether it collects and today's images of its daily cap; an editor deletes one (``agents.delete``: it
stops collecting). A viewer lists; the delete of someone else's workflow is the 404 of one that does not exist.

A deployment's "Collect uncertain images" page (``/{owner}/{project}/{model}/deployments/{deployment}/collect``):
the collect template's form (on or off, the dataset, the confidence band, whether an answer with no detection
counts, the sampling rate, the daily cap) and its counters (captured today out of the cap, in all, last). The
form posts normally (a redirect back with a message) and saves the deployment's workflow through the same
service as ``agents.save``; refusals (a dataset the workspace may not write) come back as the message. Only
those who may change the deployment (an editor of its workspace) see the page; anyone else gets a 404."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response

from lanner.db import after_commit
from lanner.deployments import service as deployments_service
from lanner.http.deps import DbSession
from lanner.projects import service as projects_service
from lanner.web import (
    paths,  # noqa: F401  (paths registers the {owner:owner} convertor)
    workspaces,
)
from lanner.web.templating import PageUser, redirect, render
from lanner.workflows import service, views
from lanner.workflows.schemas import MAX_CAP, SPLITS, Collect

router = APIRouter(include_in_schema=False)
PAGE = "/{owner:owner}/{project}/{model}/deployments/{deployment}/collect"
LIST = "/workflows"


def _list_url(user: Any, owner: str) -> str:
    return LIST + (f"?owner={owner}" if owner != user.username else "")


@router.get(LIST, response_class=HTMLResponse)
def workflows_page(request: Request, user: PageUser, session: DbSession,
                   owner: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    ws = workspaces.workspace(session, user, owner)
    owner_id, _ = service.workspace(session, user, ws["owner"], "read")
    rows = views.listing(session, owner_id, request.app.state.workflows.clock())
    return render(request, "workflows.html", {"ws": ws, "list_base": LIST, "workflows": rows,
                                              "limit": service.LIST_LIMIT}, user=user, active="workflows")


@router.post(LIST + "/{workflow_id}/delete")
def delete_workflow(request: Request, workflow_id: str, user: PageUser, session: DbSession,
                    owner: Annotated[str, Form(max_length=64)] = "") -> Response:
    """As ``agents.delete``: an editor's; a viewer gets the 403 naming the role, anyone else the 404."""
    found = service.list_workflows(session, user, owner=owner or None, id=workflow_id[:32], search=None)
    service.delete(session, user, owner=owner or None, workflow_id=workflow_id[:32])
    after_commit(session, request.app.state.workflows.forget)
    name = found["workflows"][0]["name"]
    return redirect(request, _list_url(user, found["workflows"][0]["username"]),
                    f"Workflow “{name}” deleted: it no longer collects.")


def _deployment(session: Any, user: Any, owner: str, project: str, model: str, deployment: str) -> tuple[Any, Any]:
    record = projects_service.get_model(session, user, owner=owner, project=project, model=model, write=True)
    found = deployments_service.get_deployment(session, user, owner=owner, deployment=deployment, action="train")
    return record, found


@router.get(PAGE, response_class=HTMLResponse)
def collect_page(request: Request, owner: str, project: str, model: str, deployment: str, user: PageUser,
                 session: DbSession) -> Response:
    record, found = _deployment(session, user, owner, project, model, deployment)
    return render(request, "collect.html", {
        "owner": owner.lower(), "project_slug": project, "model": record, "deployment": found,
        "form": views.form(session, found, request.app.state.workflows.clock()), "max_cap": MAX_CAP,
    }, user=user, active="projects")


@router.post(PAGE)
def save_collect(request: Request, owner: str, project: str, model: str, deployment: str, user: PageUser,
                 session: DbSession, dataset: Annotated[str, Form(max_length=260)] = "",
                 enabled: Annotated[str, Form(max_length=5)] = "",
                 low: Annotated[float, Form(ge=0, le=1, allow_inf_nan=False)] = 0.25,
                 high: Annotated[float, Form(ge=0, le=1, allow_inf_nan=False)] = 0.6,
                 rate: Annotated[float, Form(ge=0, le=100, allow_inf_nan=False)] = 10.0,
                 cap: Annotated[int, Form(ge=0, le=MAX_CAP)] = 100,
                 include_empty: Annotated[str, Form(max_length=5)] = "",
                 split: Annotated[str, Form(max_length=10)] = "train") -> Response:
    record, found = _deployment(session, user, owner, project, model, deployment)
    url = f"/{owner.lower()}/{project}/{record.slug}/deployments/{found.slug}/collect"
    if low > high:
        return redirect(request, url, "The band's low end is above its high end.", kind="error")
    if not dataset:
        return redirect(request, url, "Choose the dataset that collects the images.", kind="error")
    collect = Collect(deployment=found.slug, dataset=dataset, low=low, high=high, rate=rate / 100, daily_cap=cap,
                      include_empty=include_empty == "on", split=split if split in SPLITS else "train")
    on = enabled == "on"
    workflow, errors = service.save_collect(session, user, found, collect, enabled=on)
    after_commit(session, request.app.state.workflows.forget)
    if errors:
        return redirect(request, url, "Not collecting: " + "; ".join(e.message for e in errors), kind="error")
    if not on:
        return redirect(request, url, f"{found.name}: collecting is off (the settings are kept).")
    return redirect(request, url, f"{found.name}: collecting up to {cap} uncertain images a day into "
                                  f"{dataset} ({rate:g}% of them).")
