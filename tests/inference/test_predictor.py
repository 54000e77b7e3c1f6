"""The predictor on real weights, every task: the same rows as ``YOLO(weights).predict`` on the same image (it is
the same pipeline, so the tolerance is float noise), batched answers equal to unbatched ones, and weights whose
pickle would run code refused without running it."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from ultralytics import YOLO

from lanner.errors import Unprocessable
from lanner.inference.predictor import Options, Predictor, Weights
from tests.inference.conftest import TASK_YAMLS, shapes_image
from tests.sdk_types import assert_sdk_type

TOLERANCE = 1e-3  # pixels, and confidence: the same pipeline as YOLO.predict, so only float noise
BATCH_TOLERANCE = 0.01  # a batched forward pass sums in another order; a random model amplifies that noise


def _weights(path: Path) -> Weights:
    return Weights(path.stem + str(path.stat().st_size), lambda dest: shutil.copyfile(path, dest))


def _predictor(tmp_path: Path, **options: object) -> Predictor:
    return Predictor(home=tmp_path / "home", cache_bytes=1 << 30, **options)  # type: ignore[arg-type]


def _close(ours: object, theirs: object, tolerance: float = TOLERANCE) -> bool:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return list(ours) == list(theirs) and all(_close(ours[k], theirs[k], tolerance) for k in ours)
    if isinstance(ours, list) and isinstance(theirs, list):
        return len(ours) == len(theirs) and all(_close(a, b, tolerance) for a, b in zip(ours, theirs, strict=True))
    if isinstance(ours, float | int) and isinstance(theirs, float | int):
        return abs(ours - theirs) <= tolerance
    return ours == theirs


def _same_rows(ours: list[dict], theirs: list[dict]) -> bool:
    """The same rows in any order: a batched forward pass differs from a single one by float noise, which can
    swap rows of (almost) equal confidence."""
    left = list(theirs)
    for row in ours:
        match = next((i for i, other in enumerate(left) if _close(row, other, BATCH_TOLERANCE)), None)
        if match is None:
            return False
        left.pop(match)
    return not left


@pytest.mark.parametrize("task", list(TASK_YAMLS))
def test_every_task_answers_what_yolo_predict_answers(task: str, task_weights: dict[str, Path],
                                                      tmp_path: Path) -> None:
    image = shapes_image(160, 120)
    predictor = _predictor(tmp_path)
    try:
        response = asyncio.run(predictor.predict(_weights(task_weights[task]), image,
                                                 Options(conf=0.01, imgsz=128), model_name="ul://a/p/m"))
    finally:
        predictor.close()
    assert_sdk_type(response, "ModelsPredictResponse")
    assert response["metadata"]["task"] == task and response["metadata"]["classNames"] == [
        "circle", "square", "triangle"]
    (entry,) = response["images"]
    assert entry["shape"] == [120, 160]
    expected = YOLO(task_weights[task]).predict(image, conf=0.01, imgsz=128, verbose=False)[0].summary()
    assert expected, "the random model should find something at conf 0.01"
    assert _close(entry["results"], expected), (entry["results"][:2], expected[:2])


def test_batched_answers_equal_unbatched_ones(task_weights: dict[str, Path], tmp_path: Path) -> None:
    """Images of two sizes and three thresholds, sent together: every answer is the one it gets alone."""
    images = [shapes_image(160, 120, seed=i) for i in range(4)] + [shapes_image(96, 128, seed=9)]
    thresholds = [(0.01, 0.7), (0.02, 0.7), (0.01, 0.5), (0.01, 0.7), (0.05, 0.6)]
    weights = _weights(task_weights["detect"])  # boxes: a mask contour or a keypoint of noise moves more
    predictor = _predictor(tmp_path, window_s=0.05)

    async def one(i: int) -> dict:
        conf, iou = thresholds[i]
        return await predictor.predict(weights, images[i], Options(conf=conf, iou=iou, imgsz=128), model_name="m")

    async def together() -> list[dict]:
        await predictor.model(weights)
        return await asyncio.gather(*[one(i) for i in range(len(images))])

    try:
        batched = asyncio.run(together())
        assert max(predictor.batcher.stats.sizes) == len(images)  # one batch, two forward passes inside it
        alone = [asyncio.run(one(i)) for i in range(len(images))]
    finally:
        predictor.close()
    for merged, single in zip(batched, alone, strict=True):
        assert _same_rows(merged["images"][0]["results"], single["images"][0]["results"])
    assert sum(len(r["images"][0]["results"]) for r in batched) > 0


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return os.system, (f"touch {self.marker}",)


def test_weights_whose_pickle_runs_code_are_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    torch.save({"model": _Payload(marker), "train_args": {}}, evil)
    not_a_checkpoint = tmp_path / "text.pt"
    not_a_checkpoint.write_text("not a checkpoint")
    predictor = _predictor(tmp_path)
    try:
        for path in (evil, not_a_checkpoint):
            with pytest.raises(Unprocessable) as refused:
                asyncio.run(predictor.predict(_weights(path), np.zeros((64, 64, 3), np.uint8), model_name="m"))
            assert refused.value.code == "unloadable_weights", refused.value.message
    finally:
        predictor.close()
    assert not marker.exists()
