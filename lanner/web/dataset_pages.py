"""The dataset pages: the list (with a "New dataset" form and the upload area), a dataset (header, a paged and
filtered thumbnail grid with labels drawn, the class distribution, the health report, versions, exports, clone
and delete, and for its owner the labelling assistant: settings, state, quality per round), one image, the
compare of two versions and the trash. Every read and write is the service call the datasets (or assistant) API
makes for the same thing, with the signed-in visitor as the principal: a page shows nothing the API would not
show that user.

The grid pages with ``listing.list_images`` (the images API's paging: filters and offsets over indexed item
columns, image facts joined for the page's rows only), so page 1,000 of 100,000 images costs what page 1 does."""

from __future__ import annotations

import math
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.annotation import service as annotation_service
from lanner.assistant import service as assistant_service
from lanner.assistant.dependencies import Loop
from lanner.assistant.service import payer_tier
from lanner.bounds import BigCount
from lanner.datasets import adopt, archives, listing, selections, service, stats, versions
from lanner.datasets import trash as trash_service
from lanner.datasets.health.checks import ISSUE_CODES
from lanner.datasets.health.report import health_report
from lanner.datasets.models import Dataset, ImageSelection
from lanner.datasets.records import SPLITS, TASKS
from lanner.db import after_commit
from lanner.errors import BadRequest, Conflict, LannerError, NotFound
from lanner.gpus.catalogue import Catalogue
from lanner.http.deps import Ctx, DbSession
from lanner.http.security_headers import allow_media
from lanner.integrations import pixels
from lanner.storage.signing import URLSigner
from lanner.teams import permissions
from lanner.training import trained_on
from lanner.training.dependencies import CurrentCatalogue, Runtime
from lanner.web import assistant_panel, autolabel_dialog, grid_scores, next_steps, similar_strip, workspaces
from lanner.web.templating import PageUser, is_fragment_request, redirect, render
from lanner.web.workspaces import trash_path

router = APIRouter(include_in_schema=False)
PER_PAGE = 100
NAME_MAX = 100
EXPORT_FORMATS = {"ndjson": "NDJSON", "yolo": "YOLO (zip)", "coco": "COCO (JSON)"}
ISSUE_LABELS = {
    "corrupt": "Corrupt images", "duplicate": "Exact duplicates", "near_duplicate": "Near duplicates",
    "leakage": "Train/val leakage", "unlabeled": "Unlabelled images", "unknown_class": "Unknown class ids",
    "box_outside": "Boxes outside the image", "tiny_box": "Degenerate boxes", "tiny_object": "Tiny objects",
    "size_outlier": "Size outliers",
}


# --- helpers -----------------------------------------------------------------------------------------------------

def _cover(session: Session, dataset: Dataset, signer: URLSigner) -> str | None:
    """A signed thumbnail URL of the dataset's first image (by name), or None."""
    page = listing.list_images(session, dataset, signer=signer, limit=1, offset=0, cursor=None, include_total=False,
                               split=None, has_error=None, has_label=None, class_ids=None, text=None, issue=None,
                               sort="name", thumbnails=True, urls=False, labels=False)
    return page["images"][0].get("thumbnailUrl") if page["images"] else None


def _shapes(labels: list[dict], width: int, height: int) -> list[dict[str, Any]]:
    """Labels as SVG shapes in the image's pixel space: boxes (x, y, w, h) and polygons (points)."""
    shapes = []
    for label in labels:
        cid = int(label.get("classId", 0))
        if label.get("segments"):
            seg = label["segments"]
            points = " ".join(f"{seg[i] * width:.1f},{seg[i + 1] * height:.1f}" for i in range(0, len(seg) - 1, 2))
            shapes.append({"kind": "polygon", "points": points, "class_id": cid})
        elif label.get("bbox"):
            cx, cy, w, h = label["bbox"]
            shapes.append({"kind": "box", "class_id": cid, "x": round((cx - w / 2) * width, 1),
                           "y": round((cy - h / 2) * height, 1), "w": round(w * width, 1),
                           "h": round(h * height, 1)})
    return shapes


def _query(filters: dict[str, Any], **changes: Any) -> str:
    values = {k: v for k, v in {**filters, **changes}.items() if v not in (None, "")}
    return ("?" + urlencode(values)) if values else ""


def _base(dataset: Dataset, owner: str) -> str:
    return f"/datasets/{owner}/{dataset.slug}"


def _dataset(session: Session, user: Principal, owner: str, slug: str, *, write: bool = False) -> Dataset:
    return service.get_dataset(session, user, owner=owner, slug=slug, write=write)


# --- the list, creating, the import report -------------------------------------------------------------------------

def _list_page(request: Request, session: Session, user: Principal, signer: URLSigner, *, owner: str | None = None,
               status_code: int = 200, errors: dict[str, str] | None = None,
               form: dict[str, str] | None = None) -> HTMLResponse:
    """The visitor's datasets, or (``owner``) a team's they are in: ``web.workspaces`` (404 for any other)."""
    ws = workspaces.workspace(session, user, owner)
    rows = []
    for dataset in service.list_datasets(session, user, owner=ws["owner"]):
        view = service.dataset_view(session, dataset, owner=ws["owner"])
        rows.append({**view, "cover": _cover(session, dataset, signer)})
    return render(request, "datasets.html", {
        "datasets": rows, "tasks": TASKS, "errors": errors or {}, "ws": ws, "list_base": "/datasets",
        "form": form or {"name": "", "task": "detect", "visibility": "private"},
    }, status_code=status_code, user=user, active="datasets")


@router.get("/datasets", response_class=HTMLResponse)
def datasets_page(request: Request, user: PageUser, session: DbSession, ctx: Ctx,
                  owner: str | None = Query(None, max_length=64)) -> Response:
    return _list_page(request, session, user, ctx.signer, owner=owner)


@router.post("/datasets", response_class=HTMLResponse)
def create_dataset(request: Request, user: PageUser, session: DbSession, ctx: Ctx,
                   name: Annotated[str, Form()] = "", task: Annotated[str, Form()] = "detect",
                   visibility: Annotated[str, Form()] = "private",
                   owner: Annotated[str, Form(max_length=64)] = "") -> Response:
    """In the visitor's workspace, or (``owner``) a team's where they are an editor."""
    name = name.strip()
    form = {"name": name, "task": task, "visibility": visibility}
    error = "Give the dataset a name." if not name else (
        f"Use at most {NAME_MAX} characters." if len(name) > NAME_MAX else None)
    if not error:
        try:
            dataset = service.create_dataset(session, user, name=name, task=task, visibility=visibility,
                                             owner=owner or None)
        except (BadRequest, Conflict) as exc:
            error = exc.message
        else:
            return redirect(request, _base(dataset, owner.lower() or user.username),
                            f"Dataset “{dataset.name}” created.")
    return _list_page(request, session, user, ctx.signer, owner=owner or None, status_code=422,
                      errors={"name": error}, form=form)


@router.get("/datasets/{owner}/{slug}/import-report", response_class=HTMLResponse)
def import_report(owner: str, slug: str, request: Request, user: PageUser, session: DbSession) -> Response:
    """The last import's report (images added, files skipped and why) or its error: the upload area shows it."""
    dataset = _dataset(session, user, owner, slug)
    return render(request, "_dataset_import.html", {
        "dataset": dataset, "base": _base(dataset, owner.lower()), "report": dataset.last_ingest or None,
        "counts": service.counts(session, dataset.manifest_id)}, user=user)


# --- a dataset ---------------------------------------------------------------------------------------------------

def _grid(session: Session, dataset: Dataset, signer: URLSigner, base: str, *, page: int, split: str | None,
          class_id: int | None, labeled: str | None, issue: str | None, name: str | None = None,
          selection: ImageSelection | None = None, user: Principal | None = None, sort: str | None = None,
          mistakes: bool = False) -> dict[str, Any]:
    """``selection``: the caller's own map lasso (``?sel=``), checked by ``selections.get``. ``sort`` and
    ``mistakes``: the review-score order and filter (``web.grid_scores``), for ``user`` if a workspace member."""
    split = split if split in SPLITS else None
    name = (name or "").strip()[:NAME_MAX] or None
    issue = issue if issue in ISSUE_CODES else None
    labeled = labeled if labeled in ("yes", "no") else None
    names = list(dataset.class_names or [])
    class_id = class_id if class_id is not None and 0 <= class_id < max(len(names), 1) else None
    scores = grid_scores.offer(session, user, dataset, base, sort=sort, mistakes=mistakes)
    filters = {"split": split, "class": class_id, "labeled": labeled, "issue": issue, "q": name,
               "sel": selection.id if selection else None, "mistakes": "1" if scores and scores["mistakes"] else None,
               "sort": scores["sort"] if scores else None}
    result = listing.list_images(
        session, dataset, signer=signer, limit=PER_PAGE, offset=(page - 1) * PER_PAGE, cursor=None,
        include_total=True, split=split, has_error=None, has_label=None if labeled is None else labeled == "yes",
        class_ids=None if class_id is None else str(class_id), text=name, issue=issue, sort="name",
        thumbnails=True, urls=False, labels=True, selection=filters["sel"], ranking=grid_scores.ranking(scores))
    pages = max(1, math.ceil(result.get("total", 0) / PER_PAGE))
    images = [{**image, "shapes": _shapes(image.get("labels") or [], image["width"], image["height"])}
              for image in result["images"]]
    grid_scores.label(session, dataset, scores, images)
    return {"images": images, "total": result.get("total", 0), "page": page, "pages": pages, "filters": filters,
            "class_names": names, "splits": SPLITS, "issue_codes": ISSUE_CODES, "issue_labels": ISSUE_LABELS,
            "prev_url": base + _query(filters, page=page - 1) if page > 1 else None,
            "next_url": base + _query(filters, page=page + 1) if page < pages else None,
            "filtered": any(v is not None for k, v in filters.items() if k != "sort"), "scores": scores,
            "selection": {"id": selection.id, "count": selection.count} if selection else None,
            "adopt_targets": adopt.targets(session, user, dataset) if user and images else []}


def _page(request: Request, session: Session, user: Principal, dataset: Dataset, owner: str, grid: dict[str, Any],
          catalogue: Catalogue, runtime: Any, *, assistant: dict[str, Any] | None = None,
          status_code: int = 200) -> Response:
    """The whole dataset page; the owner's has the assistant section (``assistant``: it again, after a form)."""
    health = health_report(session, dataset) if dataset.status != "processing" else None  # stored, or computed unstored
    view = service.dataset_view(session, dataset, owner=owner, versions=True)
    balance = (health or {}).get("class_balance", {}).get("classes", [])
    # "owner" in the templates: whoever may change it (its owner, a team's editors: the permission table)
    is_owner = permissions.can(session, user_id=user.user_id, owner_id=dataset.owner_id, action="write")
    if is_owner and assistant is None:
        assistant = assistant_panel.panel(session, dataset, catalogue=catalogue, tier=payer_tier(session, dataset),
                                          runnable=assistant_panel.runnable(session, runtime, catalogue))
    findings = similar_strip.health_findings(session, user, request.app.state.lanner, dataset)
    return render(request, "dataset.html", {
        **grid, "dataset": view, "base": _base(dataset, owner), "health": health, "is_owner": is_owner,
        "chart": {"names": [c["name"] for c in balance], "counts": [c["count"] for c in balance]},
        "export_formats": EXPORT_FORMATS, "report": dataset.last_ingest or None,
        "assistant": assistant if is_owner else None, "trained": trained_on.trained_on(session, user, dataset),
        "autolabel": autolabel_dialog.offer(request, session, user, dataset, is_owner),  # the Auto-annotate dialog
        "embedding_health": findings, "embed": similar_strip.model_choice(  # its "Analyse the dataset" form's select
            session, user, dataset, owner.lower(), is_owner and bool(findings) and findings["state"] != "fresh"),
        **next_steps.offer(request, session, user, dataset, _base(dataset, owner)),  # Review, the collect line
    }, fragment="_dataset_grid.html", status_code=status_code, user=user, active="datasets")


@router.get("/datasets/{owner}/{slug}", response_class=HTMLResponse)
def dataset_page(owner: str, slug: str, request: Request, user: PageUser, session: DbSession, ctx: Ctx,
                 catalogue: CurrentCatalogue, runtime: Runtime,
                 page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
                 split: str | None = None, class_id: Annotated[str | None, Query(alias="class")] = None,
                 labeled: str | None = None, issue: str | None = None,
                 q: Annotated[str | None, Query(max_length=1000)] = None,
                 sel: Annotated[str | None, Query(max_length=32)] = None,
                 sort: Annotated[str | None, Query(max_length=40)] = None, mistakes: str | None = None) -> Response:
    """The whole page, or (htmx: the filter form and paging) just the grid. ``q``: part of the file name;
    ``sel``: a selection the visitor made on the map (someone else's: 404); ``sort`` and ``mistakes``: the
    review-score order and filter (``web.grid_scores``: ignored for anyone outside the workspace)."""
    dataset = _dataset(session, user, owner, slug)
    owner = owner.lower()
    base = _base(dataset, owner)
    grid = _grid(session, dataset, ctx.signer, base, page=page, split=split, labeled=labeled, issue=issue,
                 class_id=int(class_id) if class_id and class_id.isdigit() else None, name=q,
                 selection=selections.get(session, user, dataset, sel) if sel else None, user=user, sort=sort,
                 mistakes=mistakes == "1")
    if is_fragment_request(request):  # the grid shows nothing of the rest: no health report, counts or size
        editable = permissions.can(session, user_id=user.user_id, owner_id=dataset.owner_id, action="write")
        return render(request, "dataset.html", {**grid, "base": base, "is_owner": editable},
                      fragment="_dataset_grid.html", user=user, active="datasets")
    return _page(request, session, user, dataset, owner, grid, catalogue, runtime)


@router.get("/datasets/{owner}/{slug}/images/{image_id}", response_class=HTMLResponse)
def image_page(owner: str, slug: str, image_id: str, request: Request, user: PageUser, session: DbSession,
               ctx: Ctx) -> Response:
    dataset = _dataset(session, user, owner, slug)
    if not image_id.startswith(dataset.id + "-"):
        raise NotFound("image not found")
    detail = listing.image_detail(session, user, image_id)
    props = detail["properties"]
    url = listing.image_urls(session, user, [image_id], signer=ctx.signer)["urls"].get(image_id)
    allow_media(request, pixels.link_origins(session, ctx.settings, dataset, props["hash"]))  # a bucket image's
    base = _base(dataset, owner.lower())
    previous, following = listing.neighbours(session, dataset, image_id.removeprefix(dataset.id + "-"))
    return render(request, "dataset_image.html", {
        "dataset": dataset, "base": base, "image": props, "url": url,
        "prev_url": f"{base}/images/{dataset.id}-{previous}" if previous else None,
        "next_url": f"{base}/images/{dataset.id}-{following}" if following else None,
        "labels": detail["labels"], "class_names": detail["classNames"],
        "shapes": _shapes(detail["labels"], props["width"], props["height"]),
        "can_edit": permissions.can(session, user_id=user.user_id, owner_id=dataset.owner_id, action="write"),
        "image_key": image_id.removeprefix(dataset.id + "-"),
        "similar": similar_strip.strip(session, user, ctx, dataset, owner.lower(),
                                       image_id.removeprefix(dataset.id + "-")),
    }, user=user, active="datasets")


# --- actions -----------------------------------------------------------------------------------------------------

@router.post("/datasets/{owner}/{slug}/clone")
def clone_dataset(owner: str, slug: str, request: Request, user: PageUser, session: DbSession,
                  name: Annotated[str, Form()] = "") -> Response:
    """Into the visitor's own workspace (also of someone else's public dataset): O(1), copy-on-write."""
    source = _dataset(session, user, owner, slug)
    name = name.strip()[:NAME_MAX]
    try:
        made = versions.clone(session, user, source, name=name or None, slug=None, description=None,
                              visibility="private", owner=None, version=None)
    except LannerError as exc:
        return redirect(request, _base(source, owner.lower()), exc.message, "error")
    return redirect(request, f"/datasets/{user.username}/{made['dataset']}",
                    f"Cloned {owner.lower()}/{source.slug} as “{made['name']}”.")


@router.post("/datasets/{owner}/{slug}/delete")
def delete_dataset(owner: str, slug: str, request: Request, user: PageUser, session: DbSession) -> Response:
    dataset = _dataset(session, user, owner, slug, write=True)
    trash_service.trash_dataset(dataset)
    return redirect(request, trash_path(user, service.owner_name(session, dataset)),  # its owner now, if it moved
                    f"“{dataset.name}” moved to the trash: restore it within {trash_service.TRASH_DAYS} days.")


@router.post("/datasets/{owner}/{slug}/versions")
def create_version(owner: str, slug: str, request: Request, user: PageUser, session: DbSession,
                   description: Annotated[str, Form()] = "") -> Response:
    dataset = _dataset(session, user, owner, slug, write=True)
    base = _base(dataset, owner.lower())
    try:
        version, reused = service.create_version(session, dataset, description.strip()[:500])
    except LannerError as exc:
        return redirect(request, base, exc.message, "error")
    message = (f"Nothing changed since version {version.version}: no new version made." if reused
               else f"Version {version.version} saved.")
    return redirect(request, base + "#versions", message, "info" if reused else "success")


@router.post("/datasets/{owner}/{slug}/assistant", response_class=HTMLResponse)
async def save_assistant(owner: str, slug: str, request: Request, user: PageUser, session: DbSession, ctx: Ctx,
                         catalogue: CurrentCatalogue, loop: Loop, runtime: Runtime) -> Response:
    """The assistant's settings, saved as ``PUT .../assistant`` saves them (the owner's only: anyone else gets
    the 404 of a missing dataset). htmx gets the section again; a plain post goes back to the page, or gets the
    page with the refused form (422)."""
    dataset = annotation_service.editable_dataset(session, user, owner=owner, slug=slug, write=True)
    owner = owner.lower()
    form = assistant_panel.AssistantForm.read(await request.form())
    current = assistant_service.find(session, dataset)
    errors: dict[str, str] = {}
    tier = payer_tier(session, dataset)  # the workspace's plan: a team's rounds are the team's
    runnable = assistant_panel.runnable(session, runtime, catalogue)
    body = form.update(assistant_panel.offered(catalogue, tier, current.gpu_type if current else "cpu", runnable),
                       errors)
    if body is not None:
        assistant_service.update(session, dataset, body, catalogue=catalogue, tier=tier)
        after_commit(session, loop.wake)
        notice = {"kind": "success", "message": "Assistant on: settings saved." if form.enabled
                  else "Assistant off: settings saved."}
        if not is_fragment_request(request):
            return redirect(request, _base(dataset, owner) + "#assistant", notice["message"])
        section = assistant_panel.panel(session, dataset, catalogue=catalogue, tier=tier, notice=notice,
                                        runnable=runnable)
        return render(request, "dataset.html", {"assistant": section, "base": _base(dataset, owner)},
                      fragment="_dataset_assistant.html", user=user)
    section = assistant_panel.panel(session, dataset, catalogue=catalogue, tier=tier, form=form, errors=errors,
                                    runnable=runnable)
    if is_fragment_request(request):
        return render(request, "dataset.html", {"assistant": section, "base": _base(dataset, owner)},
                      fragment="_dataset_assistant.html", status_code=422, user=user)
    grid = _grid(session, dataset, ctx.signer, _base(dataset, owner), page=1, split=None, labeled=None,
                 issue=None, class_id=None, user=user)
    return _page(request, session, user, dataset, owner, grid, catalogue, runtime, assistant=section,
                 status_code=422)


@router.get("/datasets/{owner}/{slug}/assistant/live", response_class=HTMLResponse)
def assistant_live(owner: str, slug: str, request: Request, user: PageUser, session: DbSession,
                   catalogue: CurrentCatalogue, runtime: Runtime,
                   seen: Annotated[str, Query(max_length=32)] = "") -> Response:
    """The assistant's state for an open dataset page's poll (the owner's only, like the section): the state
    again, and the chart and rounds table when they differ from ``seen`` (the page's ``signature``). Anything
    but htmx is sent to the section itself."""
    dataset = annotation_service.editable_dataset(session, user, owner=owner, slug=slug)
    base = _base(dataset, owner.lower())
    if not is_fragment_request(request):
        return RedirectResponse(base + "#assistant", status_code=303)
    section = assistant_panel.panel(session, dataset, catalogue=catalogue, tier=payer_tier(session, dataset),
                                    runnable=assistant_panel.runnable(session, runtime, catalogue))
    return render(request, "dataset.html", {"assistant": section, "base": base,
                                            "changed": section["signature"] != seen},
                  fragment="_assistant_live.html", user=user)


@router.get("/datasets/{owner}/{slug}/export")
def export_dataset(owner: str, slug: str, user: PageUser, session: DbSession, ctx: Ctx, format: str = "ndjson",
                   v: Annotated[int | None, Query(ge=1)] = None) -> Response:
    """A download: the export service's signed URL, as ``datasets.export`` answers it."""
    dataset = _dataset(session, user, owner, slug)
    if format not in EXPORT_FORMATS:
        raise BadRequest(f"format must be one of {', '.join(EXPORT_FORMATS)}")
    result = archives.export(session, dataset, version=v, pinned_version_id=None, kind=format, owner=owner.lower(),
                            blobs=ctx.blobs, signer=ctx.signer, settings=ctx.settings, named=True,
                            image_url=pixels.export_urls(session, ctx.settings, dataset))
    return RedirectResponse(result["downloadUrl"], status_code=303)


@router.get("/datasets/{owner}/{slug}/compare", response_class=HTMLResponse)
def compare_versions(owner: str, slug: str, request: Request, user: PageUser, session: DbSession,
                     base: BigCount = 0, head: BigCount = 0) -> Response:
    """Images and labels per split and per class in two versions (0: the current content), and what changed."""
    dataset = _dataset(session, user, owner, slug)
    sides = []
    for number in (base, head):
        if number:
            frozen = versions.get_version(session, dataset, number)
            manifest, names = frozen.manifest_id, list(frozen.class_names)
        else:
            manifest, names = dataset.manifest_id, list(dataset.class_names or [])
        sides.append({"number": number, "counts": service.counts(session, manifest),
                      "classes": dict(zip(names, stats.images_per_class(session, manifest, len(names)),
                                          strict=True))})
    changes = versions.compare(session, dataset, base=base, head=head, cursor=None)["summary"]
    class_rows = list(dict.fromkeys([*sides[0]["classes"], *sides[1]["classes"]]))
    return render(request, "dataset_compare.html", {
        "dataset": dataset, "base_url": _base(dataset, owner.lower()), "sides": sides, "changes": changes,
        "class_rows": class_rows, "versions": service.list_versions(session, dataset),
        "rows": ("images", *SPLITS, "labeled", "annotations"),
    }, user=user, active="datasets")
