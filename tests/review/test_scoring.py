"""The review scores as pure functions: each kind of label error found where it is and scored by the model's
confidence; a correct image scored near 0; uniqueness from the faiss index ranks the isolated image first and
near-duplicates last; and, on predictions recorded from a real model (``benchmarks/review_queue.py --record``),
the injected label errors rank at the top of the queue."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lanner.embeddings.index import build, centred
from lanner.review import scoring
from tests.review.corrupt import KINDS

RECORDED = Path(__file__).with_name("recorded.json")  # 60 epochs at 96 px on 200 images with 20 errors, seed 21
TARGET = 14  # of the 20 injected errors in the top 10 % (20 images) of the queue: the 70 %
BOX = [0.3, 0.3, 0.2, 0.2]
OTHER = [0.7, 0.7, 0.2, 0.2]


def _pred(cls: int, bbox: list[float], confidence: float) -> dict:
    return {"classId": cls, "bbox": bbox, "confidence": confidence}


def test_a_correct_image_scores_near_zero_and_each_error_is_found_by_kind() -> None:
    labels = [{"classId": 0, "bbox": BOX}, {"classId": 1, "bbox": OTHER}]
    right = [_pred(0, BOX, 0.9), _pred(1, OTHER, 0.85)]
    assert scoring.mistakenness(labels, right).mistakenness < 0.1

    swapped = [{"classId": 1, "bbox": BOX}, labels[1]]
    found = scoring.mistakenness(swapped, right)
    assert found.findings[0]["kind"] == "class" and found.findings[0]["predictedClass"] == 0
    assert found.mistakenness > 0.8

    deleted = scoring.mistakenness(labels[1:], right)
    assert deleted.findings[0]["kind"] == "missing" and deleted.findings[0]["bbox"] == BOX
    assert deleted.mistakenness == 0.9

    shifted = [{"classId": 0, "bbox": [0.36, 0.3, 0.2, 0.2]}, labels[1]]
    loose = scoring.mistakenness(shifted, right)
    assert loose.findings[0]["kind"] == "loose" and 0.3 < loose.mistakenness < 0.6

    spurious = scoring.mistakenness([*labels, {"classId": 0, "bbox": [0.5, 0.9, 0.1, 0.1]}], right)
    assert spurious.findings[0]["kind"] == "spurious" and spurious.mistakenness == scoring.SPURIOUS_WEIGHT

    unsure = [_pred(1, BOX, 0.2), _pred(1, OTHER, 0.85)]  # a doubtful disagreement weighs less than a sure one
    assert scoring.mistakenness(labels, unsure).mistakenness < found.mistakenness


def test_uniqueness_ranks_the_isolated_image_first_and_duplicates_last() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(size=(30, 16)).astype(np.float32)
    vectors = np.vstack([base, base[:1] + 0.001, rng.normal(size=(1, 16)).astype(np.float32) * 8 + 5])
    mean, index = build(vectors)
    sims, rows = index.search(centred(vectors, mean), scoring.UNIQUENESS_K + 1)
    values = scoring.uniqueness(sims, rows)
    assert values.shape == (32,) and float(values.max()) == 1.0 and float(values.min()) >= 0.0
    assert int(np.argmax(values)) == 31  # the outlier
    assert set(np.argsort(values)[:2].tolist()) == {0, 30}  # the near-duplicate pair


def test_recorded_predictions_put_the_injected_errors_at_the_top_of_the_queue() -> None:
    recorded = json.loads(RECORDED.read_text())["images"]
    errors = [image for image in recorded if image["error"]]
    assert len(errors) == 20 and {image["error"] for image in errors} == set(KINDS)
    values = scoring.calibrated([scoring.mistakenness(im["labels"], im["predictions"]).kinds for im in recorded])
    ranked = [im for _, im in sorted(zip(values, recorded, strict=True), key=lambda pair: -pair[0])]
    top = ranked[:len(ranked) // 10]
    found = sum(1 for image in top if image["error"])
    assert found >= TARGET, f"{found}/20 injected errors in the top 10 % of the queue"
