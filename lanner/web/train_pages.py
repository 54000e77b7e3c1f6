"""The train dialog (``/train``) and the GPUs page (``/gpus``). The dialog estimates every GPU type as the estimate
endpoint does (``training.estimates``), and launches through ``training.launch.start``, the service behind
``training.start``, with the signed-in user as principal; both resolve the request's dataset and model one way
(``training.inputs``). Launch refusals (402 credit, 403 tier, 422 batch does not fit) are shown next to the
field they are about."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.billing import service as billing_service
from lanner.datasets import service as datasets_service
from lanner.errors import LannerError, NotFound, PaymentRequired
from lanner.gpus import fit
from lanner.gpus.catalogue import TIERS, Catalogue
from lanner.http.deps import Ctx, DbSession
from lanner.projects import service as projects_service
from lanner.slugs import slugify, unique_slug
from lanner.training import estimates, launch, refs
from lanner.training.capacity import NOT_OFFERED, add_availability, availability, recommend_here, runnable_types
from lanner.training.dependencies import CurrentCatalogue, Runtime
from lanner.training.schemas import MAX_GPU_COUNT, EstimateRequest, StartRequest
from lanner.web import train_chart, train_form, train_models
from lanner.web.templating import PageUser, redirect, render
from lanner.web.train_form import TrainForm

router = APIRouter(include_in_schema=False)


def _datasets(session: Session, user: Principal) -> list[dict[str, Any]]:
    out = []
    for dataset in datasets_service.list_datasets(session, user, owner=user.username):
        versions = datasets_service.list_versions(session, dataset)
        out.append({"uri": f"ul://{user.username}/datasets/{dataset.slug}", "name": dataset.name,
                    "status": dataset.status, "versions": [v.version for v in versions], "task": dataset.task,
                    "record": dataset})
    return out


def _models(session: Session, user: Principal) -> list[dict[str, str]]:
    """The user's earlier models that have weights to start from."""
    out = []
    for project in projects_service.list_projects(session, user, owner=user.username, limit=None):
        for record in projects_service.list_models(session, project, summary=True):
            if record.weights_sha256:
                out.append({"uri": f"ul://{user.username}/{project.slug}/{record.slug}",
                            "name": f"{project.slug}/{record.slug}"})
    return out


def _estimate(session: Session, user: Principal, form: TrainForm, catalogue: Catalogue, runtime: Any,
              errors: dict[str, str]) -> dict[str, Any] | None:
    """The advisor's answer for the form, arranged for the page; None (with ``errors``) when it cannot answer."""
    if not form.dataset_ref:
        return None
    own: dict[str, str] = {}
    args = form.train_args(own)
    count = form.gpu_count(own)
    deadline, budget = form.constraints(own)
    max_cost = form.max_cost_cents(own)
    errors.update({k: v for k, v in own.items() if k not in errors})
    if own:
        return None
    body = EstimateRequest(model=args.pop("model"), dataset=args.pop("data"), trainArgs=args,
                           deadlineMinutes=deadline, budgetCents=budget, gpuCount=count)
    try:
        result = estimates.estimate(session, user, body, catalogue=catalogue)
    except LannerError as exc:
        errors[train_form.field_of(exc.message)] = exc.message
        return None
    found = availability(session, runtime.executor, catalogue)
    for item in result["estimates"]:
        add_availability(item, found.get(item["gpuType"]))
    most = {gpu.id: _most_gpus(runtime.executor, gpu) for gpu in catalogue.offered()}
    runnable = {g for g in runnable_types(runtime.executor, found) if most.get(g, 1) >= count}  # that many here
    picks = recommend_here(result, runnable, deadline_minutes=deadline, budget_cents=budget)
    rows = train_form.arrange(result, picks, runnable, deadline_minutes=deadline, budget_cents=budget)
    chosen = train_form.choose(rows, picks, form)
    available = billing_service.balances(session, user_id=user.user_id).available
    cap = billing_service.cents_to_micros(max_cost) if max_cost is not None else None
    hold = launch.hold_micros(chosen, cap) if chosen else 0  # what launching would hold: start's own rule
    return {"rows": [r for r in rows if r["runnable"]], "elsewhere": [r for r in rows if not r["runnable"]],
            "picks": picks, "chosen": chosen, "chart": train_chart.chart(rows),
            "advised": (picks.get("balanced") or {}).get("gpuType", ""),
            "model": result["model"], "images": result["images"], "accuracy": result["accuracy"],
            "guidance": result.get("guidance"), "hold_micros": hold, "available_micros": available,
            "after_micros": available - hold, "constrained": deadline is not None or budget is not None,
            "most_gpus": most[chosen["gpuType"]] if chosen else 1}


def _most_gpus(executor: Any, gpu: Any) -> int:
    """The most GPUs of ``gpu``'s type the dialog offers for one run: 1 for a type that trains on one device
    (the CPU), else what one machine here has (every count up to 8 where the executor knows no limit: Ray)."""
    if gpu.multi_gpu_efficiency is None:
        return 1
    most = executor.most_devices(gpu.id)
    return MAX_GPU_COUNT if most is None else max(1, min(most, MAX_GPU_COUNT))


def _task(form: TrainForm, datasets: list[dict[str, Any]]) -> str:
    """The task of the form's dataset when it is one of the user's own (else detection)."""
    return next((d["task"] for d in datasets if d["uri"] == form.dataset_ref), None) or "detect"


def prefill(session: Session, user: Principal, form: TrainForm, datasets: list[dict[str, Any]], *,
            given: frozenset[str] = frozenset()) -> tuple[TrainForm, list[dict[str, Any]] | None]:
    """The dialog as a link opens it (Train on the home, dataset, project and model pages): a dataset that is not
    one of the user's own goes to the URI field; without one, the newest ready dataset; without a model, the best
    pretrained start for the dataset's task (``train_models``); without an image size (``given`` names the fields
    the link set), what the dataset's images need; without a project, one named after the dataset; without a
    model name, the model's name, numbered when the project has it. With the form, the pretrained starts it
    looked up (None when the link named a model), so the page does not look them up again."""
    if form.dataset and form.dataset not in {d["uri"] for d in datasets} and not form.dataset_uri:
        form = replace(form, dataset="", dataset_uri=form.dataset)
    if not form.dataset_ref:
        form = replace(form, dataset=next((d["uri"] for d in datasets if d["status"] == "ready"), ""))
    mine = next((d for d in datasets if d["uri"] == form.dataset_ref), None)
    offered = None
    if not form.model:
        task = _task(form, datasets)
        offered = train_models.starts(session, user, task)
        form = replace(form, model=train_models.default_model(offered, task))
    if "imgsz" not in given and mine is not None:
        form = replace(form, imgsz=str(train_models.default_imgsz(session, mine["record"])))
    parts = refs.dataset_parts(form.dataset_ref)
    if not form.project and parts and slugify(parts[1]):
        form = replace(form, project=parts[1])
    if not form.name and slugify(form.project):
        stem = slugify(form.model.rsplit("/", 1)[-1].removesuffix(".yaml").removesuffix(".pt")) or "model"
        try:
            project = projects_service.get_project(session, user, owner=user.username, slug=slugify(form.project))
            taken = projects_service.taken_model_slugs(session, project.id, stem)
        except NotFound:
            taken = []
        form = replace(form, name=unique_slug(stem, taken))
    return form, offered


def _page(request: Request, session: Session, user: Principal, form: TrainForm, catalogue: Catalogue,
          runtime: Any, errors: dict[str, str] | None = None, status_code: int = 200,
          datasets: list[dict[str, Any]] | None = None, offered: list[dict[str, Any]] | None = None) -> Response:
    errors = dict(errors or {})
    datasets = _datasets(session, user) if datasets is None else datasets
    estimate = _estimate(session, user, form, catalogue, runtime, errors)
    offered = train_models.starts(session, user, _task(form, datasets)) if offered is None else offered
    scratch = train_models.scratch_warning(form.model, estimate["images"]["train"] if estimate else None, offered)
    return render(request, "train.html", {
        "form": form, "errors": errors, "estimate": estimate, "datasets": datasets,
        "pretrained": offered, "scratch_warning": scratch,
        "official_models": train_form.OFFICIAL_MODELS, "my_models": _models(session, user),
        "hours": train_form.hours, "tiers": TIERS,
    }, fragment="_train_estimate.html", status_code=status_code, user=user, active="projects")


@router.get("/train", response_class=HTMLResponse)
def train_dialog(request: Request, user: PageUser, session: DbSession, catalogue: CurrentCatalogue,
                 runtime: Runtime) -> Response:
    """The dialog; with a dataset in the query (``/train?dataset=ul://...``) the GPU table as well."""
    datasets = _datasets(session, user)
    form, offered = prefill(session, user, TrainForm.read(request.query_params), datasets,
                            given=frozenset(request.query_params))
    return _page(request, session, user, form, catalogue, runtime, datasets=datasets, offered=offered)


@router.post("/train", response_class=HTMLResponse)
async def train_post(request: Request, user: PageUser, session: DbSession, catalogue: CurrentCatalogue,
                     runtime: Runtime, ctx: Ctx) -> Response:
    """``action=estimate`` (the button without JavaScript, htmx on every change): the table again.
    ``action=launch``: start the run as ``training.start`` does, then go to the model's page."""
    data = await request.form()
    form = TrainForm.read(data)
    if data.get("action") != "launch":
        return _page(request, session, user, form, catalogue, runtime)
    errors: dict[str, str] = {}
    status = 422
    try:
        url = _launch(session, user, form, catalogue, runtime, ctx.settings.executor, errors)
    except LannerError as exc:
        key = "credit" if isinstance(exc, PaymentRequired) else train_form.field_of(exc.message)
        errors[key] = exc.message
        status = exc.status_code if exc.status_code in (402, 403, 409) else 422
    if errors:
        session.rollback()  # the project and model made for this run go with it
        return _page(request, session, user, form, catalogue, runtime, errors, status_code=status)
    session.commit()
    return redirect(request, url, "Training started." + (" A quick test run goes first." if form.quick else ""))


def _launch(session: Session, user: Principal, form: TrainForm, catalogue: Catalogue, runtime: Any,
            executor_name: str, errors: dict[str, str]) -> str:
    args = form.train_args(errors, launch=True)
    count = form.gpu_count(errors)
    max_cost = form.max_cost_cents(errors)
    if not form.dataset_ref:
        errors["dataset"] = "Pick a dataset."
    if not form.gpu:
        errors["gpu"] = "Pick a GPU type."
    if not slugify(form.project):
        errors["project"] = "Name the project (letters or digits)."
    if not slugify(form.name):
        errors["name"] = "Name the model (letters or digits)."
    if errors:
        return ""
    launch.prepare(session, user, args)  # before anything to roll back: the model is profiled outside the lock
    try:
        project = projects_service.get_project(session, user, owner=user.username, slug=slugify(form.project),
                                               write=True)
    except NotFound:
        project = projects_service.create_project(session, user, slug=None, name=form.project)
    try:
        model = projects_service.create_model(session, project, name=form.name)
    except LannerError as exc:
        errors["name"] = exc.message
        return ""
    body = StartRequest(modelId=model.id, gpuType=form.gpu, gpuCount=count, trainArgs=args, maxCostCents=max_cost,
                        captureDatasetVersion=form.capture or None, allowFallback=form.fallback,
                        fullRunEpochs=int(form.epochs) if form.quick else None)
    launch.start(session, user, body, catalogue=catalogue, executor=runtime.executor, executor_name=executor_name)
    return f"/{user.username}/{project.slug}/{model.slug}"


@router.get("/gpus", response_class=HTMLResponse)
def gpus(request: Request, user: PageUser, session: DbSession, catalogue: CurrentCatalogue,
         runtime: Runtime) -> Response:
    """The catalogue: specs, prices, tiers, availability here, and how accurate the estimator has been."""
    found = availability(session, runtime.executor, catalogue)
    rows = [{"gpu": gpu, "allowed": gpu.allowed_for(user.tier), "availability": found.get(gpu.id, NOT_OFFERED).text}
            for gpu in catalogue.all()]
    rows.sort(key=lambda r: (not r["gpu"].offered, r["gpu"].price_per_hour))
    return render(request, "gpus.html", {"rows": rows, "accuracy": fit.accuracy(session, catalogue),
                                         "tiers": TIERS}, user=user, active="gpus")
