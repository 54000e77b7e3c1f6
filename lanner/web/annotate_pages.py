"""The label editor: one page per image (``/datasets/{owner}/{slug}/annotate/{key}``) whose scripts
(``static/annotate*.js``) read and write the labels through the annotation JSON API only (``GET``/``PUT
/api/datasets/{owner}/{dataset}/annotate/{key}``, proposal models, proposals, and the assistant's label-next) with
the session cookie and the CSRF header, exactly as any other client would. The page itself renders the frame: the
dataset, the image's key, the API's base URL and the keys of the next unlabelled images (the "selection" that
"Propose labels" can run on), so the editor shows nothing the API would not show the same user.

``/datasets/{owner}/{slug}/annotate`` opens the image the assistant is least sure of once it has a model (the
first of "label next"), else the first unlabelled image by name (the dataset grid's order), or the first image
when all are labelled. Only the dataset's owner edits, as in the annotation API: anyone else gets the
404 a missing dataset gets.

``?sel=`` (a selection of the visitor's: the map's lasso, or images ticked in the grid, ``datasets.selections``)
puts the editor in the selection's label queue: it opens the selection's first unlabelled image, says so ("labelling
N selected images · leave selection"), and "Label next" walks only the selection (``selection_pages.label_queue``)
until none is left, then offers the whole dataset again. Someone else's selection is a 404, as a missing one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.assistant import rounds
from lanner.assistant import service as assistant_service
from lanner.datasets import items, listing, selections, service
from lanner.datasets.models import Dataset, ImageSelection
from lanner.errors import Forbidden, NotFound
from lanner.http.deps import Ctx, DbSession
from lanner.http.security_headers import allow_media
from lanner.integrations import pixels
from lanner.review import service as review_service
from lanner.storage.signing import URLSigner
from lanner.web.templating import PageUser, redirect, render

router = APIRouter(include_in_schema=False)
SELECTION = 50  # the most images one proposals request takes (the API's bound)
KEY_MAX = 16    # DatasetItem.key's length


def _keys(session: Session, dataset: Dataset, signer: URLSigner, *, unlabelled: bool, limit: int,
          selection: ImageSelection | None = None) -> list[str]:
    """Image keys in the grid's order (name, then key), unlabelled ones only when asked, of ``selection`` only
    when given."""
    page = listing.list_images(session, dataset, signer=signer, limit=limit, offset=0, cursor=None,
                               include_total=False, split=None, has_error=None,
                               has_label=False if unlabelled else None, class_ids=None, text=None, issue=None,
                               sort="name", thumbnails=False, urls=False, labels=False,
                               selection=selection.id if selection else None)
    prefix = dataset.id + "-"
    return [image["id"].removeprefix(prefix) for image in page["images"]]


def _label_next(session: Session, dataset: Dataset) -> list[str]:
    """The key of the first "label next" image when the assistant has a model to have scored images with."""
    assistant = assistant_service.find(session, dataset)
    if assistant is None or rounds.newest_model_round(session, assistant) is None:
        return []
    return [image["key"] for image in assistant_service.label_next(session, dataset, assistant, limit=1)["images"]]


def _dataset(session: Session, user: Principal, owner: str, slug: str) -> Dataset:
    """The owner's dataset; anyone else gets the 404 of a missing one (the annotation API answers the same)."""
    try:
        return service.get_dataset(session, user, owner=owner, slug=slug, write=True)
    except Forbidden:
        raise NotFound(f"dataset '{owner}/{slug}' not found") from None


Sel = Annotated[str | None, Query(max_length=32)]


@router.get("/datasets/{owner}/{slug}/annotate", response_class=HTMLResponse)
def annotate_first(owner: str, slug: str, request: Request, user: PageUser, session: DbSession, ctx: Ctx,
                   sel: Sel = None) -> Response:
    dataset = _dataset(session, user, owner, slug)
    base = f"/datasets/{owner.lower()}/{dataset.slug}"
    if sel:  # the selection's queue: its first unlabelled image, else its first
        selection = selections.get(session, user, dataset, sel)
        keys = (_keys(session, dataset, ctx.signer, unlabelled=True, limit=1, selection=selection)
                or _keys(session, dataset, ctx.signer, unlabelled=False, limit=1, selection=selection))
        if not keys:
            return redirect(request, f"{base}?sel={selection.id}", "None of the selected images is left.", "info")
        return redirect(request, f"{base}/annotate/{keys[0]}?sel={selection.id}")
    keys = (_label_next(session, dataset)
            or _keys(session, dataset, ctx.signer, unlabelled=True, limit=1)
            or _keys(session, dataset, ctx.signer, unlabelled=False, limit=1))
    if not keys:
        return redirect(request, base, "This dataset has no images to label yet.", "info")
    return redirect(request, f"{base}/annotate/{keys[0]}")


@router.get("/datasets/{owner}/{slug}/annotate/{image_key}", response_class=HTMLResponse)
def annotate_page(owner: str, slug: str, image_key: str, request: Request, user: PageUser, session: DbSession,
                  ctx: Ctx, sel: Sel = None) -> Response:
    key = image_key
    dataset = _dataset(session, user, owner, slug)
    if not key.isalnum() or len(key) > KEY_MAX:
        raise NotFound("image not found")
    items.resolve_image(session, user, f"{dataset.id}-{key}")  # 404 for a key that is not this dataset's
    owner = owner.lower()
    base = f"/datasets/{owner}/{dataset.slug}"
    chosen = selections.get(session, user, dataset, sel) if sel else None
    selection = [k for k in _keys(session, dataset, ctx.signer, unlabelled=True, limit=SELECTION + 1,
                                  selection=chosen) if k != key]
    editor: dict[str, Any] = {
        "key": key, "owner": owner, "slug": dataset.slug, "datasetId": dataset.id, "task": dataset.task,
        "api": f"/api/datasets/{owner}/{dataset.slug}", "page": f"{base}/annotate",
        "selection": selection[:SELECTION - 1], "query": f"?sel={chosen.id}" if chosen else "",
    }
    queue = None
    if chosen:
        left = listing.next_unlabelled(session, dataset, after=None, selection=chosen.id)[1]
        queue = {"id": chosen.id, "count": chosen.count, "left": left, "grid": f"{base}?sel={chosen.id}",
                 "next": f"{base}/label-queue?sel={chosen.id}"}
        editor["queue"] = queue
    allow_media(request, pixels.link_origins(session, ctx.settings, dataset))  # bucket images, in the user's bucket
    review = review_service.image_score(session, dataset, key) if request.query_params.get("review") else None
    return render(request, "annotate.html", {
        "dataset": dataset, "base": base, "key": key, "editor": editor, "queue": queue,
        "review": review, "class_names": [str(n) for n in dataset.class_names or []],
    }, user=user, active="datasets")
