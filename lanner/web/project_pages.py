"""Projects and models: the user's projects, a project's runs table (sortable, with a Compare of the checked
runs), the compare page (curves overlaid, training arguments diffed) and the model page, which follows a run
live over Server-Sent Events (curves, console, system metrics, timing, cost) and can cancel it.

Everything comes from the services the API uses: ``projects.service`` for access (another user's private
project or model is a 404), ``training.dashboard``/``views`` for what training reports, ``training.service``
for the cancel; ``deployments.views`` for the owner's endpoints section (its forms are ``deploy_pages``).
``/{owner:owner}/...`` matches only names a user can have (``web.paths``), so it never shadows ``/datasets``,
``/account``, ``/api`` or any other page, whatever the order of the routers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from lanner.deployments import views as deployment_views
from lanner.errors import Conflict, NotFound
from lanner.exports import views as export_views
from lanner.http.deps import Ctx, DbSession
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord
from lanner.teams import permissions
from lanner.training import checkpoints, dashboard
from lanner.training import service as training_service
from lanner.training.dependencies import CurrentCatalogue
from lanner.training.state import ACTIVE
from lanner.web import live, model_view, paths, train_form, workspaces  # noqa: F401  (paths: the {owner:owner} convertor)
from lanner.web.templating import PageUser, money, redirect, render
from lanner.web.train_form import hours
from lanner.workflows import views as workflow_views

router = APIRouter(include_in_schema=False)
LIVE_INTERVAL_SECONDS = 1.0
MAX_COMPARE = 8
SORTS = {"name": lambda r: r["name"].lower(), "status": lambda r: r["status"],
         "epochs": lambda r: r["epochs_done"], "duration": lambda r: r["duration_s"] or 0,
         "cost": lambda r: r["cost_micros"] or 0, "map": lambda r: r["best_map"] if r["best_map"] is not None else -1,
         "created": lambda r: r["created_at"]}


def duration(seconds: int | float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h {rest // 60:02d}m" if hours else f"{rest // 60}m {rest % 60:02d}s"


def _live_view(state: dict[str, Any]) -> dict[str, Any]:
    """The live state as the page shows it: the figures formatted, the curves and console as they are."""
    def shown(value: Any, form: Callable[[Any], str]) -> str:
        return form(value) if value is not None else "–"

    return {**state, "elapsed": duration(state["elapsed_s"]), "eta": shown(state["eta_s"], duration),
            "cost": shown(state["cost_micros"], money), "projected": shown(state["projected_micros"], money),
            "epochs": f"{state['epochs_done']} / {state['epochs_total']}" if state["epochs_total"] else "–",
            "system": model_view.system_shown(state["system"]), "history": model_view.history_shown(state["history"]),
            "waiting": waiting_shown(state.get("waiting"))}


def waiting_shown(waiting: dict[str, Any] | None) -> str:
    """A provisioning run's wait: "a node of pool h100 is starting: 1m 20s so far, usually about 3 min; gives up at
    15 min (not billed)"."""
    if not waiting:
        return ""
    usual = max(1, round(float(waiting.get("typicalStartSeconds") or 0) / 60))
    limit = round(float(waiting.get("timeoutSeconds") or 0) / 60)
    return (f"a node of pool {waiting.get('pool')} is starting: {duration(waiting.get('elapsedSeconds') or 0)} so far, "
            f"usually about {usual} min; gives up at {limit} min (not billed)")


@router.get("/projects", response_class=HTMLResponse)
def projects(request: Request, user: PageUser, session: DbSession,
             owner: str | None = Query(None, max_length=64)) -> Response:
    """The visitor's projects, or (``owner``) a team's they are in: ``web.workspaces`` (404 for any other)."""
    ws = workspaces.workspace(session, user, owner)
    items = projects_service.list_projects(session, user, owner=ws["owner"], limit=None)
    counts = projects_service.model_counts(session, [p.id for p in items])
    rows = []
    for project in items:
        models = projects_service.list_models(session, project, limit=1)  # newest first
        last = max([project.updated_at, *(m.updated_at for m in models)])
        rows.append({"project": project, "models": counts.get(project.id, 0), "last_activity": last})
    rows.sort(key=lambda r: r["last_activity"], reverse=True)
    return render(request, "projects.html", {"rows": rows, "ws": ws, "list_base": "/projects"}, user=user,
                  active="projects")


@router.get("/{owner:owner}/{project}", response_class=HTMLResponse)
def project_page(request: Request, owner: str, project: str, user: PageUser, session: DbSession,
                 catalogue: CurrentCatalogue, sort: str = Query("created", max_length=20),
                 order: str = Query("desc", pattern="^(asc|desc)$")) -> Response:
    proj = projects_service.get_project(session, user, owner=owner, slug=project)
    rows = dashboard.model_rows(session, projects_service.list_models(session, proj, summary=True),
                                catalogue=catalogue)
    sort = sort if sort in SORTS else "created"
    rows.sort(key=SORTS[sort], reverse=order == "desc")
    return render(request, "project.html", {
        "project": proj, "owner": owner.lower(), "rows": rows, "sort": sort, "order": order,
        "is_owner": permissions.can(session, user_id=user.user_id, owner_id=proj.owner_id, action="write"),
        "duration": duration,
    }, user=user, active="projects")


@router.get("/{owner:owner}/{project}/-/compare", response_class=HTMLResponse)
def compare(request: Request, owner: str, project: str, user: PageUser, session: DbSession,
            pick: list[str] = Query([], max_length=MAX_COMPARE * 4), models: str = Query("", max_length=2000),
            ) -> Response:
    """The runs table's checked models (``?pick=a&pick=b``, the form as the browser sends it, no script needed)
    or a shared link (``?models=a,b``). Under ``/-/`` so that no model slug (never ``-``) can shadow it."""
    proj = projects_service.get_project(session, user, owner=owner, slug=project)
    named = [*pick, *models.split(",")]
    slugs = list(dict.fromkeys(s.strip() for s in named if s.strip()))[:MAX_COMPARE]
    records = [projects_service.get_model(session, user, owner=owner, project=project, model=s) for s in slugs]
    runs = dashboard.compare(session, records)
    keys = sorted({k for r in runs for k in r["args"]})
    args = []
    for key in keys:
        values = [r["args"].get(key) for r in runs]
        shown = ["" if v is None else (v if isinstance(v, str) else json.dumps(v)) for v in values]
        args.append({"key": key, "values": shown, "differs": len(set(shown)) > 1})
    chart = [{"name": r["slug"], **r["curves"]} for r in runs]  # names may repeat, slugs do not
    return render(request, "compare.html", {
        "project": proj, "owner": owner.lower(), "runs": runs, "args": args, "chart": chart,
        "differing": sum(a["differs"] for a in args),
    }, user=user, active="projects")


def full_run_offer(record: ModelRecord, run: Any, project_slug: str) -> dict[str, Any] | None:
    """After a quick test run: the full run's corrected estimate, and the train dialog filled in to launch it
    (the dialog re-checks everything ``training.start`` checks, and shows every GPU's figures again)."""
    estimate = record.full_run_estimate
    if not estimate or run is None or not run.smoke or run.status in ACTIVE:
        return None
    args = (run.launch or {}).get("trainArgs") or {}
    query = {"dataset": args.get("data", ""), "model": args.get("model", ""), "epochs": estimate["epochs"],
             "imgsz": args.get("imgsz", 640), "batch": args.get("batch", 16), "patience": args.get("patience", 100),
             "gpu": estimate["gpuType"], "project": project_slug, "name": f"{record.slug}-full"}
    return {**estimate, "url": "/train?" + urlencode({k: v for k, v in query.items() if v not in ("", None)})}


def _model(session: Any, user: Any, owner: str, project: str, model: str, *, write: bool = False) -> ModelRecord:
    return projects_service.get_model(session, user, owner=owner, project=project, model=model, write=write)


@router.get("/{owner:owner}/{project}/{model}", response_class=HTMLResponse)
def model_page(request: Request, owner: str, project: str, model: str, user: PageUser, session: DbSession,
               catalogue: CurrentCatalogue, ctx: Ctx) -> Response:
    record = _model(session, user, owner, project, model)
    state = _live_view(dashboard.live_state(session, record, catalogue=catalogue))
    download = None
    if record.weights_sha256 is not None:  # the signed link the API's models/files hands out
        name = record.weights_name or "best.pt"
        download = {"name": name, "size": record.weights_size or 0,
                    "url": ctx.signer.download_url(record.weights_sha256, name)}
    saved = [{"name": c.filename, "size": c.size or 0, "run": c.run_id, "at": c.uploaded_at,
              "current": c.sha256 == record.weights_sha256 and c.filename == record.weights_name,
              "url": ctx.signer.download_url(c.sha256, c.filename)}
             for c in checkpoints.saved_checkpoints(session, record.id) if c.sha256]
    weights, saved = model_view.weights_cards(download, saved)
    is_owner = permissions.can(session, user_id=user.user_id, owner_id=record.owner_id, action="train")
    run = training_service.latest_run(session, record.id)
    offer = full_run_offer(record, run, project) if is_owner else None
    train_url = train_form.train_again_url(record, ((run.launch if run else None) or {}).get("trainArgs"),
                                           owner=owner.lower(), project=project, username=user.username)
    deploy = deployment_views.section(session, user, record, settings=ctx.settings) if is_owner else None
    if deploy is not None:  # each endpoint's collect template: on or off, captured today
        workflow_views.annotate_rows(session, record.owner_id, deploy["rows"], request.app.state.workflows.clock())
    return render(request, "model.html", {
        "full_run": offer, "hours": hours, "deploy": deploy, "train_url": train_url,
        "owner": owner.lower(), "project_slug": project, "model": record, "state": state,
        "is_owner": is_owner, "download": weights, "checkpoints": saved,
        "exports": export_views.section(session, user, record, owner=owner, project=project, signer=ctx.signer),
        "predict_url": f"/api/models/{owner.lower()}/{project}/{record.slug}/predict",
        "preview_imgsz": model_view.preview_size(record.train_args),
        "plots": dashboard.final_plots(record.plots, record.class_names),
        "live_url": f"/{owner.lower()}/{project}/{record.slug}/live",
    }, user=user, active="projects")


def live_reader(user: Any, owner: str, project: str, model: str, catalogue: Any) -> Callable[[Any], dict[str, Any]]:
    """What the live stream reads each time: the model's live state, looked up with the visitor's access."""

    def read(session: Any) -> dict[str, Any]:
        try:
            record = _model(session, user, owner, project, model)
        except NotFound:
            return {"gone": True, "active": False}
        return _live_view(dashboard.live_state(session, record, catalogue=catalogue))

    return read


@router.get("/{owner:owner}/{project}/{model}/live")
def model_live(request: Request, owner: str, project: str, model: str, user: PageUser, session: DbSession,
               catalogue: CurrentCatalogue) -> Response:
    """The model's live state as Server-Sent Events (``run``) whenever it changes; ``end`` once the run is over
    (or the model is gone)."""
    _model(session, user, owner, project, model)  # a 404 now, not an empty stream
    read = live_reader(user, owner, project, model, catalogue)
    return live.stream(request, read, event="run", interval=LIVE_INTERVAL_SECONDS,
                       done=lambda value: not value["active"])


@router.post("/{owner:owner}/{project}/{model}/cancel")
def cancel(request: Request, owner: str, project: str, model: str, user: PageUser, session: DbSession) -> Response:
    """The API's cancel (``DELETE .../training``) as a form: the owner only, while a run is active."""
    record = _model(session, user, owner, project, model, write=True)
    url = f"/{owner.lower()}/{project}/{record.slug}"
    try:
        training_service.cancel_training(session, record)
    except Conflict as error:
        return redirect(request, url, error.message, kind="error")
    return redirect(request, url, "Training cancelled: the trainer stops at its next report.")
