"""Health findings by embedding distance, beside the exact-hash checks of ``datasets.health``: near-duplicates
(a different image whose vector is almost the same) and outliers (an image far from its nearest neighbours).

They live here, not in ``datasets.health``: the datasets domain sits below embeddings (it must not import it), so
the dataset page adds these to the stored report it shows. They are computed from the dataset's faiss index
(``embeddings.index``: one row per distinct image, vectors centred on the dataset's mean), only while the
dataset's embeddings are fresh: a stale analysis would miss the new images and call nothing about them.

Why these rules: a cosine of centred vectors above ``NEAR_DUPLICATE_COSINE`` is what a re-encoded, resized or
slightly cropped copy scores (tests/embeddings/near_duplicates.py), well above two different scenes. An outlier
is judged on its mean distance to its ``K`` nearest neighbours, with the modified z-score of Iglewicz and Hoaglin
(the same robust rule ``datasets.health.checks`` uses for sizes): above ``OUTLIER_Z``, at most ``MAX_LISTED``, the
spread taken as at least ``MIN_SPREAD`` so that an even crowd (all distances alike) has no outliers by noise."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.context import AppContext
from lanner.datasets.models import Dataset, DatasetItem
from lanner.embeddings import index
from lanner.embeddings.service import freshness, latest_analysis

NEAR_DUPLICATE_COSINE = 0.95
K = 5
OUTLIER_Z = 3.5
MIN_SPREAD = 0.05  # cosine distance: a crowd of near-equal distances has a tiny MAD that would flag noise
MIN_FOR_OUTLIERS = K + 3  # below this "far from its neighbours" means nothing
MAX_LISTED = 20


def findings(found: index.DatasetIndex, *, threshold: float = NEAR_DUPLICATE_COSINE, k: int = K,
             z: float = OUTLIER_Z, listed: int = MAX_LISTED) -> dict[str, Any]:
    """``near_duplicate``: pairs of digests with their cosine, best first; ``outlier``: digests with their mean
    cosine distance to their ``k`` nearest neighbours and robust z-score, farthest first. Each list is cut to
    ``listed``; ``count`` says how many images were found in all."""
    n = len(found.hashes)
    empty = {"near_duplicate": {"count": 0, "pairs": []}, "outlier": {"count": 0, "images": []}}
    if n < 2:
        return empty
    rows = found.index.reconstruct_n(0, n)  # the centred, normalised vectors the index holds
    scores, neighbours = found.index.search(rows, min(k + 1, n))
    pairs: dict[tuple[int, int], float] = {}
    distance = np.zeros(n, np.float64)
    for i in range(n):
        others = [(int(j), float(s)) for j, s in zip(neighbours[i], scores[i], strict=True) if j >= 0 and j != i][:k]
        distance[i] = 1.0 - np.mean([s for _, s in others]) if others else 0.0
        for j, s in others:
            if s >= threshold:
                pairs[(min(i, j), max(i, j))] = s
    near = sorted(pairs.items(), key=lambda p: -p[1])
    outliers: list[dict[str, Any]] = []
    if n >= MIN_FOR_OUTLIERS:
        median = float(np.median(distance))
        mad = max(float(np.median(np.abs(distance - median))), MIN_SPREAD)
        robust = 0.6745 * (distance - median) / mad
        far = [i for i in np.argsort(-distance) if robust[i] > z]
        outliers = [{"hash": found.hashes[i], "distance": round(float(distance[i]), 4),
                     "z": round(float(robust[i]), 2)} for i in far]
    return {"near_duplicate": {"count": len({i for pair, _ in near for i in pair}),
                               "pairs": [{"hashes": [found.hashes[i], found.hashes[j]], "cosine": round(s, 4)}
                                         for (i, j), s in near[:listed]]},
            "outlier": {"count": len(outliers), "images": outliers[:listed]}}


def dataset_findings(session: Session, ctx: AppContext, principal: Principal, dataset: Dataset) -> dict[str, Any]:
    """The dataset page's view: ``state`` ``none`` / ``stale`` (no findings: analyse first) or ``fresh`` with the
    findings, each digest given the dataset image id (``<dataset id>-<key>``) and name of its first item."""
    state = freshness(session, principal, dataset)
    if state != "fresh":
        return {"state": state}
    done = latest_analysis(session, dataset)
    found = findings(index.load(session, ctx, dataset, done.model_sha256))
    wanted = {h for p in found["near_duplicate"]["pairs"] for h in p["hashes"]}
    wanted |= {o["hash"] for o in found["outlier"]["images"]}
    items: dict[str, Any] = {}
    if wanted:
        for row in session.execute(select(DatasetItem.sha256, DatasetItem.key, DatasetItem.name).where(
                DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.sha256.in_(wanted))
                .order_by(DatasetItem.name, DatasetItem.key)):
            items.setdefault(row.sha256, {"id": f"{dataset.id}-{row.key}", "name": row.name})
    for pair in found["near_duplicate"]["pairs"]:
        pair["images"] = [items[h] for h in pair["hashes"] if h in items]
    for image in found["outlier"]["images"]:
        image.update(items.get(image["hash"], {}))
    return {"state": "fresh", **found}
