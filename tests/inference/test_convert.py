"""The conversion of Ultralytics ``Results`` to the wire, per task, on hand-made results: exact values for simple
cases, and agreement with Ultralytics' own ``Results.summary`` (what the hosted platform answers with) within
rounding, for detect, segment, pose, OBB and classify; semantic and depth maps round-trip through their PNGs;
``images.predict``'s labels are normalised dataset labels with the classes mapped."""

from __future__ import annotations

import base64

import cv2
import numpy as np
import pytest
import torch
from ultralytics.engine.results import Results

from lanner.inference import convert
from tests.sdk_types import assert_sdk_type

NAMES = {0: "circle", 1: "square", 2: "triangle"}
H, W = 100, 200
IMAGE = np.zeros((H, W, 3), np.uint8)
BOXES = torch.tensor([[10.0, 20.0, 50.0, 60.0, 0.91234567, 1.0], [0.0, 0.0, 200.0, 100.0, 0.3, 0.0]])


def _masks() -> torch.Tensor:
    masks = torch.zeros(2, H, W, dtype=torch.uint8)
    masks[0, 20:60, 10:50] = 1
    masks[1, 10:90, 100:190] = 1
    return masks


def _keypoints() -> torch.Tensor:
    points = torch.tensor([[[12.0, 22.0, 0.9], [48.0, 58.0, 0.2]], [[100.0, 50.0, 0.7], [150.0, 75.0, 0.6]]])
    return points


def _results(task: str) -> Results:
    if task == "detect":
        return Results(IMAGE, "", NAMES, boxes=BOXES.clone())
    if task == "segment":
        return Results(IMAGE, "", NAMES, boxes=BOXES.clone(), masks=_masks())
    if task == "pose":
        return Results(IMAGE, "", NAMES, boxes=BOXES.clone(), keypoints=_keypoints())
    if task == "obb":  # cx, cy, w, h, angle (rad), conf, class
        return Results(IMAGE, "", NAMES, obb=torch.tensor([[100.0, 50.0, 40.0, 20.0, 0.5, 0.8, 2.0]]))
    if task == "classify":
        return Results(IMAGE, "", NAMES, probs=torch.tensor([0.1, 0.7, 0.2]))
    raise ValueError(task)


def _close(ours: object, theirs: object, tolerance: float) -> bool:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return list(ours) == list(theirs) and all(_close(ours[k], theirs[k], tolerance) for k in ours)
    if isinstance(ours, list) and isinstance(theirs, list):
        return len(ours) == len(theirs) and all(_close(a, b, tolerance) for a, b in zip(ours, theirs, strict=True))
    if isinstance(ours, float | int) and isinstance(theirs, float | int):
        return abs(ours - theirs) <= tolerance
    return ours == theirs


@pytest.mark.parametrize("task", ["detect", "segment", "pose", "obb", "classify"])
@pytest.mark.parametrize("normalize, decimals", [(False, 5), (True, 5), (True, 2), (False, 0)])
def test_rows_agree_with_ultralytics_summary(task: str, normalize: bool, decimals: int) -> None:
    result = _results(task)
    rows = convert.result_rows(result, normalize=normalize, decimals=decimals)
    expected = result.summary(normalize=normalize, decimals=decimals)
    assert rows and _close(rows, expected, 1.001 * 10.0 ** -decimals), (rows, expected)  # a last-digit tie


def test_detect_rows_exactly() -> None:
    rows = convert.result_rows(_results("detect"))
    assert rows == [{"name": "square", "class": 1, "confidence": 0.91235,
                     "box": {"x1": 10.0, "y1": 20.0, "x2": 50.0, "y2": 60.0}},
                    {"name": "circle", "class": 0, "confidence": 0.3,
                     "box": {"x1": 0.0, "y1": 0.0, "x2": 200.0, "y2": 100.0}}]
    normalized = convert.result_rows(_results("detect"), normalize=True, decimals=3)
    assert normalized[0]["box"] == {"x1": 0.05, "y1": 0.2, "x2": 0.25, "y2": 0.6}
    assert list(rows[0]["box"].values()) == [10.0, 20.0, 50.0, 60.0]  # the CLI reads the values in order as xyxy


def test_segment_pose_obb_classify_shapes() -> None:
    segment = convert.result_rows(_results("segment"))
    xs, ys = segment[0]["segments"]["x"], segment[0]["segments"]["y"]
    assert len(xs) == len(ys) >= 4 and 10 <= min(xs) <= max(xs) <= 50 and 20 <= min(ys) <= max(ys) <= 60
    pose = convert.result_rows(_results("pose"), normalize=True)
    assert pose[0]["keypoints"] == {"x": [0.06, 0.24], "y": [0.22, 0.58], "visible": [0.9, 0.2]}
    (obb,) = convert.result_rows(_results("obb"))
    assert list(obb["box"]) == ["x1", "y1", "x2", "y2", "x3", "y3", "x4", "y4"] and obb["class"] == 2
    corners = np.array(list(obb["box"].values())).reshape(4, 2)
    assert np.allclose(corners.mean(axis=0), [100.0, 50.0], atol=1e-3)
    top = convert.result_rows(_results("classify"))
    assert [(r["class"], r["name"], r["confidence"]) for r in top] == [(1, "square", 0.7), (2, "triangle", 0.2),
                                                                      (0, "circle", 0.1)]
    empty = Results(IMAGE, "", NAMES, boxes=torch.zeros(0, 6))
    assert convert.result_rows(empty) == []


def test_a_whole_response_is_the_sdk_type() -> None:
    entries = [convert.image_entry(_results(task), {"preprocess": 1.0, "inference": 2.0, "postprocess": 0.5})
               for task in ("detect", "segment", "pose", "obb", "classify")]
    response = convert.predict_response(entries, class_names=list(NAMES.values()), task="detect", model="ul://a/b/c",
                                        call_seconds=0.01, alive_seconds=3.0, versions={"lanner": "0"})
    assert_sdk_type(response, "ModelsPredictResponse")
    assert response["metadata"]["imageCount"] == 5 and entries[0]["shape"] == [H, W]


def _png(data: str) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(base64.b64decode(data), np.uint8), cv2.IMREAD_UNCHANGED)


def test_semantic_and_depth_maps_round_trip() -> None:
    mask = torch.zeros(H, W, dtype=torch.int64)
    mask[:, :50] = 2
    semantic = Results(IMAGE, "", NAMES, semantic_mask=mask)
    entry = convert.image_entry(semantic, {})
    assert entry["results"] == [{"name": "circle", "class": 0, "pixel_ratio": 0.75},
                                {"name": "triangle", "class": 2, "pixel_ratio": 0.25}]
    assert np.array_equal(_png(entry["semantic_mask"]["data"]), mask.numpy())
    depth = torch.linspace(0.5, 10.0, H * W).reshape(H, W)
    for bits in (8, 12, 16):
        encoded = convert.image_entry(Results(IMAGE, "", NAMES, depth=depth), {}, bits=bits)
        assert encoded["results"] == [] and encoded["depth"]["bits"] == bits
        info = encoded["depth"]
        back = _png(info["data"]).astype(np.float64) * info["max"] / (255 if bits == 8 else 65535)  # as the CLI
        assert np.abs(back - depth.numpy()).max() <= 10.0 / (1 << bits) + 1e-6
    assert_sdk_type({"images": [entry], "metadata": {"imageCount": 1, "functionTimeAlive": 0.0,
                                                     "functionTimeCall": 0.0, "version": {}}},
                    "ModelsPredictResponse")


def test_annotations_are_normalised_dataset_labels_with_mapped_classes() -> None:
    detect = convert.annotations(_results("detect"))
    assert detect["predictions"][0] == {"classId": 1, "bbox": [0.15, 0.4, 0.2, 0.4]}
    assert detect["confidences"] == [0.912346, 0.3] and detect["partial"] is False
    mapped = convert.annotations(_results("detect"), class_map=[None, 5, 6])  # class 0 dropped, 1 -> 5
    assert [p["classId"] for p in mapped["predictions"]] == [5] and mapped["confidences"] == [0.912346]
    segment = convert.annotations(_results("segment"))["predictions"][0]
    polygon = np.array(segment["segments"]).reshape(-1, 2)
    assert polygon.min() >= 0 and np.allclose(polygon.max(axis=0), [0.25, 0.6], atol=0.01)
    pose = convert.annotations(_results("pose"))["predictions"][0]
    assert pose["keypoints"] == [0.06, 0.22, 2.0, 0.24, 0.58, 0.0]  # seen (conf >= 0.5) is 2, else 0
    obb = convert.annotations(_results("obb"))["predictions"][0]
    assert obb["classId"] == 2 and len(obb["obb"]) == 8 and np.allclose(obb["bbox"][:2], [0.5, 0.5], atol=1e-3)
    classify = convert.annotations(_results("classify"))
    assert classify == {"predictions": [{"classId": 1}], "confidences": [0.7], "partial": False}
    full = Results(IMAGE, "", NAMES, boxes=BOXES[:1].repeat(300, 1))
    assert convert.annotations(full)["partial"] is True
    for response in (detect, mapped, classify):
        assert_sdk_type({"success": True, **response, "modelUsed": "ul://a/b/c"}, "ImagesPredictResponse")
