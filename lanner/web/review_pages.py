"""The Review queue's pages: ``/datasets/{owner}/{slug}/review`` says where the dataset's review scores stand
(none, being computed with progress, fresh, stale), offers to compute them, and lists the most mistaken images;
``POST .../review/next`` (the editor's "Review" button) opens the unreviewed image with the highest
mistakenness in the editor and marks it reviewed for this pass. With no scores, or the pass done, it leads to
the review page, whose buttons compute them or start a new pass: never a dead end. The page reads as the review
API reads (``members_dataset``): any member of the dataset's workspace, a team's viewer included, sees the scores
(the dataset page's "Review" button leads here), its images linked to the image page; only who may change the
dataset (its owner, a team's editors) gets the buttons and the editor's links. Anyone else gets a 404."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from lanner.db import after_commit
from lanner.errors import Conflict, Unprocessable
from lanner.http.deps import DbSession
from lanner.review import service
from lanner.teams import permissions
from lanner.web.templating import PageUser, redirect, render

router = APIRouter(include_in_schema=False)
TOP = 20


@router.get("/datasets/{owner}/{slug}/review", response_class=HTMLResponse)
def review_page(owner: str, slug: str, request: Request, user: PageUser, session: DbSession) -> Response:
    dataset = service.members_dataset(session, user, owner, slug)
    can_edit = permissions.can(session, user_id=user.user_id, owner_id=dataset.owner_id, action="write")
    state = service.status(session, user, dataset)
    top = service.scores(session, dataset, sort="mistakenness", limit=TOP, offset=0)["images"]
    base = f"/datasets/{owner.lower()}/{dataset.slug}"
    names = [str(n) for n in dataset.class_names or []]
    choices = service.models(session, user, dataset) if can_edit else []
    return render(request, "review.html", {"dataset": dataset, "base": base, "state": state, "top": top,
                                           "class_names": names, "models": choices, "can_edit": can_edit},
                  user=user, active="datasets")


@router.post("/datasets/{owner}/{slug}/review/compute")
def compute(owner: str, slug: str, request: Request, user: PageUser, session: DbSession,
            model: Annotated[str, Form(max_length=300)] = "") -> Response:
    dataset = service.editable(session, user, owner, slug)
    base = f"/datasets/{owner.lower()}/{dataset.slug}"
    try:
        _, created = service.request(session, user, dataset, model or None)
    except (Conflict, Unprocessable) as exc:
        return redirect(request, f"{base}/review", exc.message, "error")
    if created:
        after_commit(session, request.app.state.review.wake)
    return redirect(request, f"{base}/review", "Computing review scores: this page follows the progress.", "info")


@router.post("/datasets/{owner}/{slug}/review/next")
def review_next(owner: str, slug: str, request: Request, user: PageUser, session: DbSession,
                restart: Annotated[str, Form()] = "") -> Response:
    dataset = service.editable(session, user, owner, slug)
    base = f"/datasets/{owner.lower()}/{dataset.slug}"
    image = service.next_for_review(session, dataset, restart=restart == "1")
    if image is not None:
        return redirect(request, f"{base}/annotate/{image['key']}?review=1")
    if service.latest_job(session, dataset) is None:
        return redirect(request, f"{base}/review", "No review scores yet: compute them first.", "info")
    return redirect(request, f"{base}/review", "You have reviewed every scored image in this pass.", "info")
