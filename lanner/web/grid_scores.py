"""The dataset grid's review-score choices (``review.grid``): the Sort choices "Likeliest label mistakes first" and
"Most unique first", the "Possible mistakes only" filter, where the scores stand (fresh or stale, or how to get
them) and each thumbnail's score while the grid is sorted or filtered by it.

Only the dataset's workspace members are offered any of it, as the map's colours are (``review.service
.is_member``: a team's viewers read them); for anyone else, a reader of a public dataset among them, ``sort`` and
``mistakes`` are ignored and the page says nothing of scores. A viewer is told that an editor computes them; an
editor gets the Review page's link."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets.listing import Ranking
from lanner.datasets.models import Dataset
from lanner.review import grid
from lanner.review import service as review_service
from lanner.teams import permissions


def offer(session: Session, user: Principal | None, dataset: Dataset, base: str, *, sort: str | None,
          mistakes: bool) -> dict[str, Any] | None:
    """None for a visitor outside the workspace; else the choices as the page shows them: ``summary``
    (``grid.summary``, None without scores), the ``sort`` and ``mistakes`` in force (dropped without scores or
    when nothing could match), the Review page's link for an editor, and ``ranking`` for ``listing``."""
    if user is None or not review_service.is_member(session, user, dataset):
        return None
    summary = grid.summary(session, dataset)
    unique = bool(summary and summary["unique"])
    sort = sort if summary and sort in grid.SORTS and (unique or grid.SORTS[sort] != "uniqueness") else None
    mistakes = mistakes and summary is not None
    editable = permissions.can(session, user_id=user.user_id, owner_id=dataset.owner_id, action="write")
    threshold = summary["cutoff"] if summary else None
    return {"summary": summary, "sort": sort, "show": grid.SORTS.get(sort or "") or (
                "mistakenness" if mistakes else None),
            "mistakes": mistakes, "threshold": threshold, "share": round(grid.MISTAKES_SHARE * 100),
            "review_url": f"{base}/review" if editable else None,
            "ranking": grid.ranking(dataset, sort=sort, mistakes=mistakes, threshold=threshold)}


def ranking(scores: dict[str, Any] | None) -> Ranking | None:
    return scores["ranking"] if scores else None


def label(session: Session, dataset: Dataset, scores: dict[str, Any] | None, images: list[dict[str, Any]]) -> None:
    """Each image of the page gets ``score`` (``grid.badges``) while the grid is sorted or filtered by one."""
    if not scores or not scores["show"] or not images:
        return
    prefix = dataset.id + "-"
    keys = [image["id"].removeprefix(prefix) for image in images]
    found = grid.badges(session, dataset, keys, [str(n) for n in dataset.class_names or []], show=scores["show"])
    for image, key in zip(images, keys, strict=True):
        image["score"] = found[key]
