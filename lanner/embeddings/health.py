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

import hashlib
import json
import os
import threading
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
LIVE_MAX = 5_000  # above this many vectors a page never computes findings (a search per image): the job's end does
_lock = threading.Lock()
_memo: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}  # (dataset id, digest) -> (content key, findings)


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


def stored(session: Session, ctx: AppContext, dataset: Dataset, model_sha256: str, *, compute: bool
            ) -> dict[str, Any] | None:
    """The findings of the dataset's index as it is now: from memory, from the file beside the indexes (keyed by
    the digests they were computed over, so a label edit keeps them), else computed and saved when ``compute``
    or the dataset is small (``LIVE_MAX``), else None. Computing searches once per image: about 30 s for
    100,000 on two cores, which an embedding job's end pays (``warm``), never a page."""
    found = index.load(session, ctx, dataset, model_sha256)
    content = hashlib.sha256("".join(found.hashes).encode()).hexdigest()
    with _lock:
        memo = _memo.get((dataset.id, model_sha256))
    if memo is not None and memo[0] == content:
        return memo[1]
    path = ctx.settings.resolved_home / "embeddings" / "findings" / model_sha256 / f"{dataset.id}.json"
    try:
        saved = json.loads(path.read_text())
        result = saved["findings"] if saved.get("content") == content else None
    except (FileNotFoundError, ValueError, KeyError):
        result = None
    if result is None:
        if not compute and len(found.hashes) > LIVE_MAX:
            return None
        result = findings(found)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.partial")
        partial.write_text(json.dumps({"content": content, "findings": result}))
        partial.replace(path)
    with _lock:
        _memo[(dataset.id, model_sha256)] = (content, result)
    return result


def warm(ctx: AppContext, dataset_id: str, model_sha256: str) -> None:
    """Compute the findings of a dataset that was just analysed (after ``index.warm``), off any request."""
    with ctx.db.session() as session:
        dataset = session.get(Dataset, dataset_id)
        if dataset is not None:
            stored(session, ctx, dataset, model_sha256, compute=True)


def dataset_findings(session: Session, ctx: AppContext, principal: Principal, dataset: Dataset) -> dict[str, Any]:
    """The dataset page's view: ``state`` ``none`` / ``stale`` (no findings: analyse first), ``pending`` (a large
    dataset analysed before findings were kept: the next analysis computes them) or ``fresh`` with the findings,
    each digest given the dataset image id (``<dataset id>-<key>``) and name of its first item."""
    state = freshness(session, principal, dataset)
    if state != "fresh":
        return {"state": state}
    done = latest_analysis(session, dataset)
    kept = stored(session, ctx, dataset, done.model_sha256, compute=False)
    if kept is None:
        return {"state": "pending"}
    found = json.loads(json.dumps(kept))  # a copy: the names below are this request's, not the memo's
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
