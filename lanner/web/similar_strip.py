"""The "Similar" strip of the dataset image page and the label editor, and the embedding findings of the dataset
page's health section.

The strip is ``images.find_similar_images`` (``embeddings.similar``: the same service call, the visitor as the
principal, so it shows only images of datasets the visitor may read), the image's own dataset included, cut to
``LIMIT``. Without embeddings it is never a dead end: it says why, offers whoever may write the dataset the
button that starts the analysis (``datasets.create_embeddings``' service call), and while a job runs shows its
progress, polled through ``/datasets/{owner}/{slug}/similar/{key}`` (also what the editor loads per image)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.context import AppContext
from lanner.datasets import items
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset
from lanner.db import after_commit
from lanner.embeddings import health, schemas, similar
from lanner.embeddings import service as embeddings_service
from lanner.errors import Conflict, NotFound, Unprocessable
from lanner.http.deps import Ctx, DbSession
from lanner.teams import permissions
from lanner.web.templating import PageUser, is_fragment_request, redirect, render, safe_next

router = APIRouter(include_in_schema=False)
LIMIT = 8
POLL_SECONDS = 3
KEY_MAX = 64


def strip(session: Session, user: Principal, ctx: AppContext, dataset: Dataset, owner: str, key: str, *,
          editor: bool = False) -> dict[str, Any]:
    """What the strip shows for image ``key`` of ``dataset`` (``state``: ``ready``, ``missing`` or ``running``);
    ``editor``: in the label editor (its button comes back there)."""
    base = f"/datasets/{owner}/{dataset.slug}"
    view: dict[str, Any] = {"base": base, "key": key, "images": [], "message": None, "progress": None,
                            "poll_url": f"{base}/similar/{key}" + ("?editor=1" if editor else ""),
                            "next": f"{base}/annotate/{key}" if editor else f"{base}/images/{dataset.id}-{key}",
                            "can_start": permissions.can(session, user_id=user.user_id, owner_id=dataset.owner_id,
                                                         action="write"),
                            "poll": None}
    active = embeddings_service.active_job(session, dataset)
    try:
        answer = similar.similar_images(session, user, ctx, f"{dataset.id}-{key}", include_source=True)
    except Conflict as missing:
        view.update(state="missing", message=_plain(missing.message))
    else:
        view["state"] = "ready"
        for image in answer["images"][:LIMIT]:
            where = image["dataset"]
            view["images"].append({
                "href": f"/datasets/{where['owner']}/{where['dataset']}/images/{image['id']}",
                "thumb": image["thumbnailUrl"], "name": image["name"], "score": image["score"],
                "dataset": f"{where['owner']}/{where['dataset']}"})
    if active is not None:
        view.update(state="running" if view["state"] == "missing" else view["state"], poll=POLL_SECONDS,
                    progress=schemas.active_job(active)["progress"], job_status=active.status,
                    training_head=embeddings_service.training_head(session, ctx.settings, active))
    return view


def _plain(message: str) -> str:
    """The API's 409 speaks of SDK calls; a page speaks of its button."""
    if "came after" in message:
        return "This image was added after the dataset was last analysed."
    return "This dataset has no embeddings yet, so there is nothing to compare this image with."


def health_findings(session: Session, user: Principal, ctx: AppContext, dataset: Dataset) -> dict[str, Any] | None:
    """The embedding findings for the dataset page (None while it imports)."""
    if dataset.status == "processing":
        return None
    return health.dataset_findings(session, ctx, user, dataset)


def model_choice(session: Session, user: Principal, dataset: Dataset, owner: str, can_start: bool
                 ) -> dict[str, Any] | None:
    """The forms' model select (``_embedding_model.html``; ``embeddings.service.options``) with the link that
    trains a model on the dataset, for the page to say what to do when the server has no model; None for a
    visitor who may not start an analysis."""
    if not can_start:
        return None
    choice = embeddings_service.options(session, user, dataset)
    ref = f"ul://{owner}/datasets/{dataset.slug}"
    return {**choice, "task": dataset.task, "train_url": "/train?" + urlencode({"dataset": ref})}


def _readable(session: Session, user: Principal, owner: str, slug: str, key: str) -> Dataset:
    dataset = datasets_service.get_dataset(session, user, owner=owner, slug=slug)  # 404 unless readable
    if not key.isalnum() or len(key) > KEY_MAX:
        raise NotFound("image not found")
    items.resolve_image(session, user, f"{dataset.id}-{key}")  # 404 for a key that is not this dataset's
    return dataset


@router.get("/datasets/{owner}/{slug}/similar/{image_key}", response_class=HTMLResponse)
def similar_fragment(owner: str, slug: str, image_key: str, request: Request, user: PageUser, session: DbSession,
                     ctx: Ctx, editor: bool = False) -> Response:
    """The strip alone, for a page's poll and the editor (a plain visit goes to the image page)."""
    key = image_key
    dataset = _readable(session, user, owner, slug, key)
    if not is_fragment_request(request):
        return redirect(request, f"/datasets/{owner.lower()}/{dataset.slug}/images/{dataset.id}-{key}")
    return render(request, "dataset_image.html", {"similar": strip(session, user, ctx, dataset, owner.lower(), key,
                                                                     editor=editor)},
                  fragment="_similar_strip.html", user=user)


@router.post("/datasets/{owner}/{slug}/embeddings")
def start_analysis(owner: str, slug: str, request: Request, user: PageUser, session: DbSession, ctx: Ctx,
                   next: Annotated[str, Form(max_length=2000)] = "",
                   model: Annotated[str, Form(max_length=300)] = "") -> Response:
    """Start (or find) the dataset's analysis, as ``POST /api/datasets/{owner}/{dataset}/embeddings`` does, with
    the form's ``model`` (its ``modelId``; none: the dataset's model); back to ``next`` (a path on this site)
    with what happened. Unreadable dataset or model: 404; readable, not writable: 403."""
    back = safe_next(next) if next else f"/datasets/{owner.lower()}/{slug}"
    try:
        _, created = embeddings_service.create(session, user, ctx.settings, owner=owner, slug=slug,
                                               model_id=model or None)
    except (Conflict, Unprocessable) as refused:
        return redirect(request, back, refused.message, "error")
    if created:
        after_commit(session, request.app.state.embeddings.wake)
    return redirect(request, back, "The analysis has started: similar images appear when it finishes."
                    if created else "The analysis is already under way.", "success" if created else "info")
