"""What the grid's bulk actions do with a selection of images (``datasets.selections``: the map's lasso, or
images ticked in the grid, stored the same way by ``POST .../map/selection``) beyond moving and removing them:

- "Label these": the editor opened in the selection's label queue (``annotate_pages``, ``?sel=``), whose "Label
  next" asks ``label-queue`` here for the selection's next unlabelled image;
- "New dataset from these": a private dataset of just those images (``versions.clone_selection``). Not a
  version: a version is a snapshot of the whole dataset, and restoring or comparing one that held a subset would
  read as the other images deleted;
- "Add these to": the images copied into another dataset the visitor may change, of the same task, with their
  labels and splits (``adopt.adopt_selection``: ``datasets.adopt_images`` with ``release: false``); images whose
  bytes it already holds are skipped, a taken name gets the source key appended, classes are matched by name.

A selection is its maker's alone: with anyone else's (or a dataset they may not read) the answer is the 404 of
a missing one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import Response

from lanner.annotation.service import editable_dataset
from lanner.datasets import adopt, listing, selections, versions
from lanner.datasets import service as datasets_service
from lanner.errors import LannerError
from lanner.http.deps import DbSession
from lanner.web.templating import PageUser, redirect

router = APIRouter(include_in_schema=False)
NAME_MAX = 100
KEY_MAX = 16  # DatasetItem.key's length
Sel = Annotated[str | None, Query(max_length=32)]  # a selection's id (``?sel=``), as the editor takes it


@router.get("/datasets/{owner}/{slug}/label-queue")
def label_queue(owner: str, slug: str, user: PageUser, session: DbSession, sel: Sel = None,
                after: Annotated[str, Query(max_length=KEY_MAX)] = "") -> dict[str, Any]:
    """The label queue's next image after ``after``: of the selection ``sel``, else of the whole dataset (the
    grid's order, round again from the first), its editor's ``url``, and how many unlabelled images are
    ``left``; ``next`` is null when none is left but ``after``. The owner's only, as the editor."""
    dataset = editable_dataset(session, user, owner=owner, slug=slug, write=True)
    chosen = selections.get(session, user, dataset, sel) if sel else None
    key, left = listing.next_unlabelled(session, dataset, after=after or None,
                                        selection=chosen.id if chosen else None)
    query = f"?sel={chosen.id}" if chosen else ""
    base = f"/datasets/{owner.lower()}/{dataset.slug}"
    return {"next": key, "left": left, "count": chosen.count if chosen else None, "grid": base + query,
            "url": f"{base}/annotate/{key}{query}" if key else None}


@router.post("/datasets/{owner}/{slug}/selection/dataset")
def dataset_from_selection(owner: str, slug: str, request: Request, user: PageUser, session: DbSession,
                           sel: Annotated[str, Form(max_length=32)] = "",
                           name: Annotated[str, Form()] = "") -> Response:
    """A new private dataset of the selection's images, in the visitor's workspace; on to it."""
    dataset = editable_dataset(session, user, owner=owner, slug=slug, write=True)
    chosen = selections.get(session, user, dataset, sel)
    base = f"/datasets/{owner.lower()}/{dataset.slug}"
    try:
        made = versions.clone_selection(session, user, dataset, chosen, name=name.strip()[:NAME_MAX] or None)
    except LannerError as exc:
        return redirect(request, f"{base}?sel={chosen.id}", exc.message, "error")
    count = made["imageCount"]
    return redirect(request, f"/datasets/{made['owner']}/{made['dataset']}",
                    f"New dataset “{made['name']}” made of {count} selected image{'s' if count != 1 else ''} "
                    f"from {dataset.name}.")


@router.post("/datasets/{owner}/{slug}/selection/adopt")
def add_selection_to(owner: str, slug: str, request: Request, user: PageUser, session: DbSession,
                     sel: Annotated[str, Form(max_length=32)] = "",
                     target: Annotated[str, Form(max_length=200)] = "") -> Response:
    """The selection's images copied into ``target`` (``owner/slug``, a dataset the visitor may change); on to
    it. A target they may not see, may not change, or whose task differs is refused on this page, saying why."""
    dataset = editable_dataset(session, user, owner=owner, slug=slug, write=True)
    chosen = selections.get(session, user, dataset, sel)
    back = f"/datasets/{owner.lower()}/{dataset.slug}?sel={chosen.id}"
    into_owner, _, into_slug = target.partition("/")
    try:
        into = datasets_service.get_dataset(session, user, owner=into_owner, slug=into_slug, write=True)
        added = adopt.adopt_selection(session, user, into, dataset, chosen)
    except LannerError as exc:
        return redirect(request, back, exc.message, "error")
    skipped = chosen.count - added
    return redirect(request, f"/datasets/{into_owner.lower()}/{into.slug}",
                    f"Added {added} image{'s' if added != 1 else ''} from {dataset.name} to {into.name}, with their "
                    "labels and splits" + (f"; {skipped} {'were' if skipped != 1 else 'was'} already there" if skipped
                                           else "") + ".")
