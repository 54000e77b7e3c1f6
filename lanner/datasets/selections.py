"""A user's selection of a dataset's images (the map's lasso, or images ticked in the grid for "Label these" and
"New dataset from these"): stored, so that the grid filters by it (``listing.list_images(selection=...)``) with
its own paging, filters and bulk actions, and the editor's label queue walks it (``listing.next_unlabelled``).

A selection is its maker's alone: anyone else (even someone who may read the dataset) gets the 404 of a missing
one, as for a missing dataset. Selections are scratch state, not content: each user keeps the ``KEEP`` newest per
dataset, older ones go when a new one is made, and all go with the dataset or the user."""

from __future__ import annotations

import re

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets.models import Dataset, DatasetItem, ImageSelection, ImageSelectionItem
from lanner.errors import BadRequest, NotFound

MAX_IMAGES = 200_000  # the largest map the page draws: a lasso around all of it
KEEP = 10
_KEY = re.compile(r"^[A-Za-z0-9_-]{1,16}$")


def create(session: Session, principal: Principal, dataset: Dataset, keys: list[str]) -> ImageSelection:
    """A new selection of the images of ``dataset`` among ``keys`` (item keys; others are ignored: an image
    removed since the map was drawn simply is not in it)."""
    unique = list(dict.fromkeys(keys))
    if not unique:
        raise BadRequest("select at least one image")
    if len(unique) > MAX_IMAGES:
        raise BadRequest(f"a selection holds at most {MAX_IMAGES} images")
    if not all(_KEY.match(k) for k in unique):
        raise BadRequest("keys must be the images' keys (the part of an image id after the dataset's id)")
    older = select(ImageSelection.id).where(ImageSelection.dataset_id == dataset.id,
                                            ImageSelection.user_id == principal.user_id)
    stale = session.scalars(older.order_by(ImageSelection.created_at.desc()).offset(KEEP - 1)).all()
    if stale:
        session.execute(delete(ImageSelectionItem).where(ImageSelectionItem.selection_id.in_(stale)))
        session.execute(delete(ImageSelection).where(ImageSelection.id.in_(stale)))
    selection = ImageSelection(dataset_id=dataset.id, user_id=principal.user_id)
    session.add(selection)
    session.flush()
    session.execute(insert(ImageSelectionItem), [{"selection_id": selection.id, "key": k} for k in unique])
    selection.count = int(session.scalar(
        select(func.count()).select_from(DatasetItem).where(
            DatasetItem.manifest_id == dataset.manifest_id,
            DatasetItem.key.in_(select(ImageSelectionItem.key).where(
                ImageSelectionItem.selection_id == selection.id)))) or 0)
    return selection


def get(session: Session, principal: Principal, dataset: Dataset, selection_id: str) -> ImageSelection:
    """The caller's own selection of ``dataset``; 404 for any other (someone else's, another dataset's)."""
    selection = session.get(ImageSelection, selection_id[:32])
    if selection is None or selection.dataset_id != dataset.id or selection.user_id != principal.user_id:
        raise NotFound("selection not found")
    return selection
