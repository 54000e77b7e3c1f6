"""Ultralytics ``Results`` to the wire: the hosted ``PredictResponse`` (``models.predict``) and the dataset label
shape of ``images.predict``. Pure functions of a result: no torch work beyond one host copy per result.

PredictResponse rows (``ultralytics_platform.types.ModelsPredictResponse``), per task:
- detect: ``{name, class, confidence, box{x1,y1,x2,y2}}`` in pixels of the original image, or 0-1 when
  ``normalize``;
- segment: the same plus ``segments{x[], y[]}``, the polygon of the mask (empty when the mask has no contour);
- pose: the same plus ``keypoints{x[], y[], visible[]}``, ``visible`` holding each keypoint's confidence;
- obb: ``box{x1,y1,...,x4,y4}``, the four corners;
- classify: the top 5 ``{name, class, confidence}``, best first;
- semantic: ``{name, class, pixel_ratio}`` per class present, plus ``semantic_mask`` (a PNG of class ids);
- depth: no rows, plus ``depth`` (a PNG whose value maps back to metres as ``pixel * max / (2^bits - 1)``, 16-bit
  PNGs for 12 and 16 bits).
The box key order is the corner order: the official CLI reads ``list(box.values())`` as xyxy (or 4 corners).

Dataset labels (``images.predict``) follow Lanner's stored conventions (``lanner.datasets.records``), all 0-1:
``bbox`` (cx, cy, w, h), ``segments`` (a flat polygon), ``keypoints`` (flat x, y, v with v = 2 for a keypoint
seen with confidence >= 0.5, else 0), ``obb`` (the four corners, flat), with the detection's class mapped to
the dataset's.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

TOP_K = 5  # classification rows, as the hosted platform and Results.summary give
KEYPOINT_SEEN = 0.5  # a predicted keypoint this confident is labelled visible (2), else not labelled (0)


def _numpy(value: Any) -> np.ndarray:
    return value.cpu().numpy() if hasattr(value, "cpu") else np.asarray(value)


def _names(result: Any) -> dict[int, str]:
    return {int(k): str(v) for k, v in result.names.items()}


def _rounded(values: np.ndarray, decimals: int) -> list[Any]:
    return np.round(values.astype(np.float64), decimals).tolist()


def result_rows(result: Any, *, normalize: bool = False, decimals: int = 5) -> list[dict[str, Any]]:
    """The hosted ``results`` rows of one image's ``Results``."""
    names = _names(result)
    if result.probs is not None:
        return _classify_rows(result, names, decimals)
    if getattr(result, "semantic_mask", None) is not None:
        return _semantic_rows(result, names, decimals)
    data = result.obb if result.obb is not None else result.boxes
    if data is None or len(data) == 0:
        return []
    count = len(data)
    height, width = result.orig_shape if normalize else (1, 1)
    scale = np.array([width, height], dtype=np.float64)
    corners = _numpy(data.xyxyxyxy if result.obb is not None else data.xyxy).astype(np.float64)
    corners = np.round(corners.reshape(count, -1, 2) / scale, decimals).tolist()
    confidences = _rounded(_numpy(data.conf), decimals)
    classes = _numpy(data.cls).astype(int).tolist()
    polygons = result.masks.xy if result.masks is not None else None
    keypoints = _numpy(result.keypoints.data).astype(np.float64) if result.keypoints is not None else None
    rows = []
    for i in range(count):
        box = {}
        for j, (x, y) in enumerate(corners[i], start=1):
            box[f"x{j}"], box[f"y{j}"] = x, y
        row: dict[str, Any] = {"name": names.get(classes[i], str(classes[i])), "class": classes[i],
                               "confidence": confidences[i], "box": box}
        if polygons is not None:
            polygon = np.asarray(polygons[i], dtype=np.float64).reshape(-1, 2) / scale
            row["segments"] = {"x": _rounded(polygon[:, 0], decimals), "y": _rounded(polygon[:, 1], decimals)}
        if keypoints is not None:
            points = keypoints[i]
            row["keypoints"] = {"x": _rounded(points[:, 0] / scale[0], decimals),
                                "y": _rounded(points[:, 1] / scale[1], decimals)}
            if points.shape[1] == 3:
                row["keypoints"]["visible"] = _rounded(points[:, 2], decimals)
        rows.append(row)
    return rows


def _classify_rows(result: Any, names: dict[int, str], decimals: int) -> list[dict[str, Any]]:
    probs = _numpy(result.probs.data).astype(np.float64)
    top = np.argsort(-probs, kind="stable")[:TOP_K]
    return [{"name": names.get(int(c), str(int(c))), "class": int(c), "confidence": round(float(probs[c]), decimals)}
            for c in top]


def _semantic_rows(result: Any, names: dict[int, str], decimals: int) -> list[dict[str, Any]]:
    mask = _numpy(result.semantic_mask.data)
    classes, counts = np.unique(mask, return_counts=True)
    rows = []
    for class_id, count in zip(classes.tolist(), counts.tolist(), strict=True):
        if len(names) == 1:  # a binary model: 1 is the class, everything else background
            if class_id != 1:
                continue
            class_id = 0
        elif class_id not in names:  # an ignore label such as 255
            continue
        rows.append({"name": names[class_id], "class": class_id, "pixel_ratio": round(count / mask.size, decimals)})
    return rows


def _png(pixels: np.ndarray) -> str:
    ok, encoded = cv2.imencode(".png", pixels)
    if not ok:
        raise ValueError("PNG encoding failed")
    return base64.b64encode(encoded.tobytes()).decode()


def semantic_mask(result: Any) -> dict[str, Any]:
    mask = _numpy(result.semantic_mask.data)
    pixels = mask.astype(np.uint8 if mask.max(initial=0) < 256 else np.uint16)
    return {"shape": list(pixels.shape[:2]), "encoding": "png", "data": _png(pixels)}


def depth_map(result: Any, *, bits: int = 8) -> dict[str, Any]:
    depth = _numpy(result.depth.data).astype(np.float64).squeeze()
    low, high = (float(depth.min()), float(depth.max())) if depth.size else (0.0, 0.0)
    levels = (1 << bits) - 1
    fraction = np.clip(depth / high, 0.0, 1.0) if high > 0 else np.zeros_like(depth)
    if bits == 8:
        pixels = np.round(fraction * 255).astype(np.uint8)
    else:  # 12 and 16 bits travel as 16-bit PNGs, read back as pixel * max / 65535
        pixels = np.round(np.round(fraction * levels) / levels * 65535).astype(np.uint16)
    return {"shape": list(pixels.shape[:2]), "encoding": "png", "data": _png(pixels), "min": low, "max": high,
            "bits": bits}


def image_entry(result: Any, speed: dict[str, float], *, normalize: bool = False, decimals: int = 5,
                bits: int = 8) -> dict[str, Any]:
    """One element of ``images[]``: shape ``[h, w]``, per-image speed in ms, rows, and a dense map if any."""
    entry: dict[str, Any] = {"shape": [int(result.orig_shape[0]), int(result.orig_shape[1])],
                             "speed": {key: round(float(speed.get(key, 0.0)), 3)
                                       for key in ("preprocess", "inference", "postprocess")},
                             "results": result_rows(result, normalize=normalize, decimals=decimals)}
    if getattr(result, "semantic_mask", None) is not None:
        entry["semantic_mask"] = semantic_mask(result)
    if getattr(result, "depth", None) is not None:
        entry["depth"] = depth_map(result, bits=bits)
    return entry


def predict_response(entries: Sequence[dict[str, Any]], *, class_names: Sequence[str], task: str, model: str,
                     call_seconds: float, alive_seconds: float, versions: dict[str, str]) -> dict[str, Any]:
    """The whole ``PredictResponse``: ``images`` (one entry per image) and ``metadata``."""
    return {"images": list(entries),
            "metadata": {"imageCount": len(entries), "classNames": list(class_names), "functionTimeAlive":
                         round(alive_seconds, 3), "functionTimeCall": round(call_seconds, 4), "model": model,
                         "task": task, "version": dict(versions)}}


def annotations(result: Any, *, class_map: Sequence[int | None] | None = None, max_det: int = 300,
                decimals: int = 6) -> dict[str, Any]:
    """``images.predict``'s ``predictions`` (dataset labels), ``confidences`` and ``partial`` (the detection cap
    was reached: there may be more objects). ``class_map[i]`` is the dataset class of model class ``i`` (None
    drops it); without one, classes are kept as the model numbers them."""

    def mapped(model_class: int) -> int | None:
        if class_map is None:
            return model_class
        return class_map[model_class] if 0 <= model_class < len(class_map) else None

    if result.probs is not None:
        probs = _numpy(result.probs.data).astype(np.float64)
        best = int(np.argmax(probs)) if probs.size else -1
        target = mapped(best) if best >= 0 else None
        if target is None:
            return {"predictions": [], "confidences": [], "partial": False}
        return {"predictions": [{"classId": target}], "confidences": [round(float(probs[best]), decimals)],
                "partial": False}
    data = result.obb if result.obb is not None else result.boxes
    if data is None or len(data) == 0:
        return {"predictions": [], "confidences": [], "partial": False}
    count = len(data)
    boxes = _numpy(data.xywhn) if result.obb is None else _aabb(_numpy(data.xyxyxyxyn).astype(np.float64))
    xywhn = np.round(boxes.astype(np.float64), decimals)
    corners = (np.round(_numpy(data.xyxyxyxyn).astype(np.float64).reshape(count, -1), decimals)
               if result.obb is not None else None)
    polygons = result.masks.xyn if result.masks is not None else None
    keypoints = _numpy(result.keypoints.data).astype(np.float64) if result.keypoints is not None else None
    height, width = result.orig_shape
    confidences, classes = _numpy(data.conf).astype(np.float64), _numpy(data.cls).astype(int)
    predictions, kept = [], []
    for i in range(count):
        target = mapped(int(classes[i]))
        if target is None:
            continue
        label: dict[str, Any] = {"classId": target, "bbox": xywhn[i].tolist()}
        if polygons is not None:
            label["segments"] = np.round(np.asarray(polygons[i], np.float64).reshape(-1), decimals).tolist()
        if keypoints is not None:
            label["keypoints"] = _keypoint_label(keypoints[i], width, height, decimals)
        if corners is not None:
            label["obb"] = corners[i].tolist()
        predictions.append(label)
        kept.append(round(float(confidences[i]), decimals))
    return {"predictions": predictions, "confidences": kept, "partial": count >= max_det}


def _aabb(corners: np.ndarray) -> np.ndarray:
    """Axis-aligned (cx, cy, w, h) of (n, 4, 2) corners, clipped to the image."""
    points = np.clip(corners.reshape(len(corners), -1, 2), 0.0, 1.0)
    low, high = points.min(axis=1), points.max(axis=1)
    return np.concatenate([(low + high) / 2, high - low], axis=1)


def _keypoint_label(points: np.ndarray, width: int, height: int, decimals: int) -> list[float]:
    xy = np.round(points[:, :2] / np.array([width, height], dtype=np.float64), decimals)
    if points.shape[1] < 3:
        return xy.reshape(-1).tolist()
    seen = np.where(points[:, 2] >= KEYPOINT_SEEN, 2.0, 0.0)
    return np.concatenate([xy, seen[:, None]], axis=1).reshape(-1).tolist()
