"""The review scores' order and filter on the dataset listing (``review.grid`` handing SQL to ``datasets.listing``),
on SQLite and PostgreSQL alike: highest first, ties by key, images without a score last (PostgreSQL puts NULLs
first in a descending order unless told), pages that cover every image once, the "possible mistakes" cut-off at
the top tenth with its peers, and counts that combine with the listing's own filters."""

from __future__ import annotations

from typing import Any

from lanner.datasets import listing
from lanner.datasets.models import Dataset
from lanner.db import utcnow
from lanner.review import grid as review_grid
from lanner.review.models import ImageScore, ReviewJob
from lanner.storage.signing import URLSigner
from tests.datasets.test_image_listing import COUNT, grid  # noqa: F401  (a fixture)

# image number -> (mistakenness, uniqueness); the rest of the COUNT images are unscored
SCORES = {3: (0.9, 0.2), 7: (0.9, None), 1: (0.5, 1.0), 12: (0.3, 0.6), 4: (0.0, 0.6), 20: (0.2, None),
          8: (0.1, None), 9: (0.05, 0.1), 10: (0.6, None), 11: (0.7, None), 13: (0.8, None)}


def _seed(app: Any, dataset_id: str, expected: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The scores (a completed job's) by image key; returns name -> key."""
    keys = {name: image["id"].rsplit("-", 1)[1] for name, image in expected.items()}
    with app.state.lanner.db.session() as session:
        dataset = session.get(Dataset, dataset_id)
        job = ReviewJob(dataset_id=dataset.id, owner_id=dataset.owner_id, model_sha256="d" * 64, model_label="t",
                        revision=dataset.revision, total=len(SCORES), status="completed", completed_at=utcnow())
        session.add(job)
        session.flush()
        for number, (mistaken, unique) in SCORES.items():
            session.add(ImageScore(dataset_id=dataset.id, key=keys[f"img_{number:03d}.jpg"], job_id=job.id,
                                   mistakenness=mistaken, uniqueness=unique))
    return keys


def _walk(app: Any, dataset_id: str, *, sort: str | None, mistakes: bool = False,
          split: str | None = None) -> tuple[list[str], set[int]]:
    names, totals, offset = [], set(), 0
    signer = URLSigner(b"k" * 32, "http://lanner.test/", 600)
    with app.state.lanner.db.session() as session:
        dataset = session.get(Dataset, dataset_id)
        summary = review_grid.summary(session, dataset)
        ranking = review_grid.ranking(dataset, sort=sort, mistakes=mistakes, threshold=summary["cutoff"])
        while True:
            page = listing.list_images(
                session, dataset, signer=signer, limit=5, offset=offset, cursor=None,
                include_total=True, split=split, has_error=None, has_label=None, class_ids=None, text=None,
                issue=None, sort="name", thumbnails=False, urls=False, labels=False, ranking=ranking)
            names += [image["name"] for image in page["images"]]
            totals.add(page["total"])
            if not page["hasMore"]:
                return names, totals
            offset += 5


def _number(name: str) -> int:
    return int(name[4:7])


def test_score_orders_page_every_image_once_with_the_unscored_last(grid, app):  # noqa: F811
    keys = _seed(app, grid["id"], grid["expected"])
    names, totals = _walk(app, grid["id"], sort="mistakenness-desc")
    scored = sorted((n for n in keys if _number(n) in SCORES), key=lambda n: (-SCORES[_number(n)][0], keys[n]))
    unscored = sorted((n for n in keys if _number(n) not in SCORES), key=keys.__getitem__)
    assert names == scored + unscored and totals == {COUNT}

    names, _ = _walk(app, grid["id"], sort="uniqueness-desc")
    unique = [n for n in keys if SCORES.get(_number(n), (0, None))[1] is not None]
    assert names[:len(unique)] == sorted(unique, key=lambda n: (-SCORES[_number(n)][1], keys[n]))
    assert names[len(unique):] == sorted(set(keys) - set(unique), key=keys.__getitem__)


def test_possible_mistakes_are_the_top_tenth_and_combine_with_the_filters(grid, app):  # noqa: F811
    _seed(app, grid["id"], grid["expected"])
    with app.state.lanner.db.session() as session:
        summary = review_grid.summary(session, session.get(Dataset, grid["id"]))
    assert summary["scored"] == len(SCORES) and summary["unique"] == 5 and summary["images"] == COUNT
    assert summary["cutoff"] == 0.9  # 11 scored: the top 2 (ceil of 1.1), both 0.9
    names, totals = _walk(app, grid["id"], sort=None, mistakes=True)
    assert names == ["img_003.jpg", "img_007.jpg"] and totals == {2}  # in the listing's own order (name)
    val = [n for n, image in grid["expected"].items() if image["split"] == "val"]
    names, totals = _walk(app, grid["id"], sort="mistakenness-desc", mistakes=True, split="val")
    assert names == ["img_003.jpg"] and "img_003.jpg" in val and totals == {1}  # img_007 is in train
