"""The two review scores, as pure functions of labels, predictions and vectors (no database, no model): what the
scores job computes per image and what the tests check against recorded predictions.

*Mistakenness* adapts FiftyOne brain's ``compute_mistakenness`` for detections (a model's confident predictions
that disagree with the labels are evidence the labels are wrong) to the four kinds of error a labeller makes:

* ``missing``  — a prediction overlaps no label (IoU < ``MATCH_IOU`` with every label): a box was never drawn, or
  was drawn far from the object. Score: the prediction's confidence.
* ``class``    — a label whose overlapping predictions (IoU >= ``CLASS_IOU``) favour another class. Score: the
  best other-class confidence less the best same-class confidence (FiftyOne weighs a mismatch by confidence).
* ``loose``    — a label whose best same-class prediction sits on it only loosely. Score: that prediction's
  confidence × (1 − IoU), so a shifted or loose box scores by how far off it is and how sure the model is.
* ``spurious`` — a label no prediction overlaps (IoU >= ``MATCH_IOU``) even at low confidence: possibly a box on
  nothing. Score: ``SPURIOUS_WEIGHT`` × (1 − the best overlapping confidence), weighted down because a weak model
  also misses real objects.

The image's mistakenness is its worst finding (the maximum: a queue ordered by it shows the most certain error
first; a sum would rank crowded images above wrong ones). Boxes are normalised ``[cx, cy, w, h]``; labels
without a ``bbox`` (classify) are ignored.

*Uniqueness* is the mean cosine distance of an image's vector to its ``k`` nearest neighbours (in the dataset's
faiss index, ``embeddings.index``: centred, normalised vectors), divided by the largest in the dataset, so 1
is the dataset's most isolated image and near-duplicates are near 0 (FiftyOne's ``compute_uniqueness`` ranks the
same way)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MATCH_IOU = 0.3
CLASS_IOU = 0.45
SPURIOUS_WEIGHT = 0.5
KEEP_FINDINGS = 5  # the worst findings kept per image, for the editor to say why an image is in the queue
UNIQUENESS_K = 5


KINDS = ("missing", "class", "loose", "spurious")
CALIBRATION_QUANTILE = 95
CALIBRATION_FLOOR = 0.05  # a kind this model almost never reports still needs this much to count


@dataclass
class Score:
    mistakenness: float
    findings: list[dict[str, Any]] = field(default_factory=list)
    kinds: dict[str, float] = field(default_factory=dict)  # the worst finding of each kind


def iou(a: list[float], b: list[float]) -> float:
    """IoU of two normalised ``[cx, cy, w, h]`` boxes."""
    ax0, ay0, ax1, ay1 = a[0] - a[2] / 2, a[1] - a[3] / 2, a[0] + a[2] / 2, a[1] + a[3] / 2
    bx0, by0, bx1, by1 = b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2
    w, h = max(0.0, min(ax1, bx1) - max(ax0, bx0)), max(0.0, min(ay1, by1) - max(ay0, by0))
    union = a[2] * a[3] + b[2] * b[3] - w * h
    return w * h / union if union > 0 else 0.0


def _finding(kind: str, score: float, bbox: list[float], **more: Any) -> dict[str, Any]:
    return {"kind": kind, "score": round(float(score), 4), "bbox": [round(float(v), 5) for v in bbox], **more}


def mistakenness(labels: list[dict[str, Any]], predictions: list[dict[str, Any]]) -> Score:
    """``labels``: ``[{classId, bbox}]``; ``predictions``: ``[{classId, bbox, confidence}]`` (at a low confidence
    threshold: the spurious check needs the unsure ones too)."""
    boxes = [label for label in labels if label.get("bbox") and len(label["bbox"]) == 4]
    preds = [p for p in predictions if p.get("bbox") and len(p["bbox"]) == 4]
    overlap = [[iou(label["bbox"], p["bbox"]) for p in preds] for label in boxes]
    found: list[dict[str, Any]] = []
    for j, p in enumerate(preds):
        if all(row[j] < MATCH_IOU for row in overlap):
            found.append(_finding("missing", p["confidence"], p["bbox"], predictedClass=int(p["classId"])))
    for i, label in enumerate(boxes):
        cls = int(label["classId"])
        near = [(overlap[i][j], p) for j, p in enumerate(preds) if overlap[i][j] >= MATCH_IOU]
        if not near:
            found.append(_finding("spurious", SPURIOUS_WEIGHT, label["bbox"], label=i, classId=cls))
            continue
        best_any = max(float(p["confidence"]) for _, p in near)
        if best_any < 1.0:
            found.append(_finding("spurious", SPURIOUS_WEIGHT * (1.0 - best_any), label["bbox"], label=i,
                                  classId=cls))
        tight = [(o, p) for o, p in near if o >= CLASS_IOU]
        same = max((float(p["confidence"]) for _, p in tight if int(p["classId"]) == cls), default=0.0)
        other = max(((float(p["confidence"]), int(p["classId"])) for _, p in tight if int(p["classId"]) != cls),
                    default=(0.0, cls))
        if other[0] > same:
            found.append(_finding("class", other[0] - same, label["bbox"], label=i, classId=cls,
                                  predictedClass=other[1]))
        mates = [(o, p) for o, p in near if int(p["classId"]) == cls]
        if mates:
            o, p = max(mates, key=lambda m: float(m[1]["confidence"]) * m[0])
            found.append(_finding("loose", float(p["confidence"]) * (1.0 - o), label["bbox"], label=i, classId=cls,
                                  iou=round(o, 4), predicted=[round(float(v), 5) for v in p["bbox"]]))
    kinds = {kind: max((f["score"] for f in found if f["kind"] == kind), default=0.0) for kind in KINDS}
    found = sorted((f for f in found if f["score"] >= 0.01), key=lambda f: -f["score"])
    return Score(found[0]["score"] if found else 0.0, found[:KEEP_FINDINGS], kinds)


def calibrated(kinds: list[dict[str, float]]) -> list[float]:
    """The dataset's mistakenness, once every image is scored: each kind's score over what is usual for this
    model on this dataset (its ``CALIBRATION_QUANTILE``-th percentile, at least ``CALIBRATION_FLOOR``), the
    image's worst kind, over the dataset's worst (so 1 is the queue's head).

    Why: a model's confidences are its own. One that is sure of nothing (a few epochs on a few hundred images
    answers 0.3 to 0.6) finds a loose box or a doubtful label on every image and a missing box on almost none;
    raw, the everyday doubts outrank the rare sure disagreements. Measured against each kind's own spread, a
    missing box the model alone sees stands out as it should (docs/benchmarks.md "Review queue")."""
    if not kinds:
        return []
    matrix = np.array([[row.get(kind, 0.0) for kind in KINDS] for row in kinds], np.float64)
    usual = np.maximum(np.percentile(matrix, CALIBRATION_QUANTILE, axis=0), CALIBRATION_FLOOR)
    worst = (matrix / usual).max(axis=1)
    top = float(worst.max())
    return (worst / top if top > 0 else worst).round(4).tolist()


def uniqueness(sims: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per image, its uniqueness in [0, 1] from a search of the dataset's index with every image's own vector
    (``sims``/``rows``: n × (k+1) cosine similarities and row numbers, best first, the image itself among them
    unless a duplicate took its place): the mean cosine distance to its k nearest others, over the largest."""
    n = sims.shape[0]
    if n < 2:
        return np.zeros(n, np.float32)
    own = rows == np.arange(n)[:, None]
    others = np.where(own, np.nan, sims.astype(np.float64))
    k = sims.shape[1] - 1
    # the k best that are not the image itself (a missing self means a duplicate filled the last place)
    ordered = -np.sort(-np.nan_to_num(others, nan=-np.inf), axis=1)[:, :k]
    distance = (1.0 - ordered).mean(axis=1)
    top = float(distance.max())
    return (distance / top if top > 0 else np.zeros(n)).astype(np.float32)
