"""The review scores on the dataset grid: its orders "likeliest label mistakes first" and "most unique first", its
filter "possible mistakes only", and each thumbnail's score with what it means.

The orders and the filter are SQL handed to ``datasets.listing`` (a ``listing.Ranking``: an outer join to
``image_scores``), so the grid pages in the database as it does by name; images without a score (unlabelled, or
added since the job) come last. A *possible mistake* is an image in the top tenth of the scored images by
mistakenness (at least one, and above 0): the Review page has no threshold of its own (it lists the head of the
queue, and the queue walks every scored image), and the calibrated mistakenness (``scoring.calibrated``) is
relative to the dataset, so a share of it is what stays meaningful from one model to the next (the benchmark,
docs/benchmarks.md "Review queue", found 19 of 20 injected errors in the top 10 %).

Only the workspace's members see any of it (``service.is_member``: a team's viewers read, as on the map); the
caller checks that."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import false, func, select
from sqlalchemy.orm import Session

from lanner.datasets import service as datasets_service
from lanner.datasets.listing import Ranking
from lanner.datasets.models import Dataset, DatasetItem
from lanner.review import service
from lanner.review.models import ImageScore

SORTS = {"mistakenness-desc": "mistakenness", "uniqueness-desc": "uniqueness"}  # the SDK's ``<field>-<way>`` names
MISTAKES_SHARE = 0.10
KIND_WORDS = {"missing": "missing box?", "class": "wrong class?", "loose": "loose box?", "spurious": "box on nothing?"}


def summary(session: Session, dataset: Dataset) -> dict[str, Any] | None:
    """Where the dataset's scores stand for the grid: None before a job completed, else ``fresh`` or ``stale``
    (``service.freshness``), the model, how many images have each score and the possible-mistake cut-off."""
    job = service.latest_job(session, dataset)
    state = service.freshness(session, dataset, job)
    if job is None or state == "none":
        return None
    here = select(DatasetItem.key).where(DatasetItem.manifest_id == dataset.manifest_id)
    scored, unique = session.execute(select(func.count(), func.count(ImageScore.uniqueness)).where(
        ImageScore.dataset_id == dataset.id, ImageScore.key.in_(here))).one()
    images = datasets_service.dataset_counts(session, dataset)["images"]  # remembered per revision
    return {"state": state, "model": job.model_label, "revision": job.revision, "images": int(images),
            "scored": int(scored), "unique": int(unique), "cutoff": cutoff(session, dataset, int(scored))}


def cutoff(session: Session, dataset: Dataset, scored: int) -> float | None:
    """The mistakenness of the last image in the top ``MISTAKES_SHARE`` (ties keep their peers), None when no
    image has a mistakenness above 0."""
    if not scored:
        return None
    head = max(1, math.ceil(scored * MISTAKES_SHARE))
    value = session.scalar(select(ImageScore.mistakenness).where(ImageScore.dataset_id == dataset.id)
                           .order_by(ImageScore.mistakenness.desc()).offset(head - 1).limit(1))
    if value is None or value <= 0:
        value = session.scalar(select(func.min(ImageScore.mistakenness)).where(
            ImageScore.dataset_id == dataset.id, ImageScore.mistakenness > 0))
    return None if value is None else float(value)


def ranking(dataset: Dataset, *, sort: str | None, mistakes: bool, threshold: float | None) -> Ranking | None:
    """The listing's order by ``sort`` (a key of ``SORTS``; None: the grid's own order) and, with ``mistakes``,
    its filter to the images whose mistakenness reaches ``threshold`` (``cutoff``; None: no image does)."""
    values = only = None
    if sort in SORTS:
        column = ImageScore.uniqueness if SORTS[sort] == "uniqueness" else ImageScore.mistakenness
        values = (select(ImageScore.key.label("key"), column.label("value"))
                  .where(ImageScore.dataset_id == dataset.id).subquery("scores"))
    if mistakes:
        only = select(ImageScore.key).where(ImageScore.dataset_id == dataset.id, ImageScore.mistakenness > 0,
                                            ImageScore.mistakenness >= threshold if threshold is not None else false())
    return None if values is None and only is None else Ranking(values=values, only=only)


def badges(session: Session, dataset: Dataset, keys: list[str], class_names: list[str], *,
           show: str) -> dict[str, dict[str, Any]]:
    """Per key of the page, what its thumbnail says: ``show`` "mistakenness" ("mistake 0.92 · wrong class?
    (dog)", its worst finding) or "uniqueness" ("unique 0.80"); an image without that score says so."""
    found = {row.key: row for row in session.scalars(select(ImageScore).where(
        ImageScore.dataset_id == dataset.id, ImageScore.key.in_(keys)))}
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        row = found.get(key)
        value = None if row is None else (row.uniqueness if show == "uniqueness" else row.mistakenness)
        if value is None:
            out[key] = {"value": None, "text": "not scored",
                        "title": "No review score: unlabelled, or added after the scores were computed"}
            continue
        if show == "uniqueness":
            out[key] = {"value": value, "text": f"unique {value:.2f}",
                        "title": "Uniqueness 0 to 1: 1 is the dataset's most isolated image, near 0 a near-duplicate"}
            continue
        why = _why((row.findings or [None])[0], class_names) if value > 0 else "no doubt found"
        out[key] = {"value": value, "text": f"mistake {value:.2f} · {why}",
                    "title": "Mistakenness 0 to 1: how sure the model is that a label is wrong (1 = the Review "
                             "queue's head); " + why}
    return out


def _why(finding: dict[str, Any] | None, class_names: list[str]) -> str:
    if not finding:
        return "no doubt found"
    kind = str(finding.get("kind"))
    words = KIND_WORDS.get(kind, kind)
    cls = finding.get("predictedClass", finding.get("classId"))
    if isinstance(cls, int) and 0 <= cls < len(class_names):
        words += f" (model: {class_names[cls]})" if kind == "class" else f" ({class_names[cls]})"
    return words
