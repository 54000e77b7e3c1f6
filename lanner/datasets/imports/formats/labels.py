"""YOLO label rows (``class x y ...``) into ``Label`` records, shared by the YOLO and NDJSON importers.

One row layout per task, as Ultralytics reads them:
detect ``c cx cy w h``; segment ``c x1 y1 ... xn yn`` (n >= 3); obb ``c x1 y1 ... x4 y4``;
pose ``c cx cy w h`` + K keypoints of ``ndim`` values (``x y`` or ``x y visibility``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lanner.datasets.records import Label

EPS = 1e-3  # how far outside [0, 1] a coordinate may stray (rounding) before the label is refused


class LabelError(ValueError):
    """A label row the importer cannot accept; the message is the reason, for a person."""


@dataclass(frozen=True)
class LabelSpec:
    """What rows must look like for one dataset."""

    task: str
    nc: int
    kpt_shape: tuple[int, int] | None = None


def numbers(values: Sequence[object]) -> list[float]:
    """Tokens (text from a .txt file, or JSON values) as finite floats."""
    out: list[float] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise LabelError(f"{value!r} is not a number")
        try:
            number = float(value)
        except ValueError:
            raise LabelError(f"{value!r} is not a number") from None
        if not math.isfinite(number):
            raise LabelError(f"{value!r} is not a finite number")
        out.append(number)
    return out


def is_polygon_length(n: int) -> bool:
    """Class plus at least three x,y points."""
    return n >= 7 and n % 2 == 1


def infer_task(lengths: Iterable[int], kpt_shape: tuple[int, int] | None) -> str:
    """The task the row lengths show: keypoints declared → pose; only 9-value rows → obb; polygons → segment."""
    if kpt_shape:
        return "pose"
    polygons = {n for n in lengths if is_polygon_length(n)}
    if polygons == {9}:
        return "obb"
    return "segment" if polygons else "detect"


def row_to_label(values: Sequence[float], spec: LabelSpec) -> Label:
    """Check one row against the dataset's task and classes; coordinates within EPS of [0, 1] are clipped."""
    n = len(values)
    class_id = _class_id(values[0] if values else None, spec.nc)
    coords = list(values[1:])
    task = spec.task
    if task == "pose":
        assert spec.kpt_shape is not None
        k, ndim = spec.kpt_shape
        if n != 5 + k * ndim:
            raise LabelError(f"pose rows need {5 + k * ndim} values (class, box, {k}x{ndim} keypoints), not {n}")
        return Label(class_id, box=_box(coords[:4]), keypoints=_keypoints(coords[4:], ndim))
    if task == "obb":
        if n != 9:
            raise LabelError(f"obb rows need 9 values (class and 4 corner points), not {n}")
        corners = unit(coords, "corner")
        return Label(class_id, box=bounding_box(corners), obb=corners)
    if task == "segment":
        if not is_polygon_length(n):
            raise LabelError(f"segment rows need a class and at least 3 x,y points (an odd count >= 7), not {n} values")
        polygon = unit(coords, "polygon")
        return Label(class_id, box=bounding_box(polygon), polygon=polygon)
    # detect: boxes, or a box taken from a polygon / pose row, as Ultralytics does for a detect model
    if n == 5:
        return Label(class_id, box=_box(coords))
    if spec.kpt_shape and n == 5 + spec.kpt_shape[0] * spec.kpt_shape[1]:
        return Label(class_id, box=_box(coords[:4]))
    if is_polygon_length(n):
        return Label(class_id, box=bounding_box(unit(coords, "polygon")))
    raise LabelError(f"detect rows need 5 values (class cx cy w h), not {n}")


def unit(values: Sequence[float], what: str) -> list[float]:
    """Normalised coordinates: refuse anything beyond EPS outside [0, 1], clip the rest."""
    out: list[float] = []
    for value in values:
        if value < -EPS or value > 1 + EPS:
            raise LabelError(f"{what} coordinate {value:g} is outside 0-1 (labels must be normalised)")
        out.append(min(1.0, max(0.0, value)))
    return out


def bounding_box(points: Sequence[float]) -> tuple[float, float, float, float]:
    """(cx, cy, w, h) around flat x,y pairs."""
    xs, ys = points[0::2], points[1::2]
    x1, x2, y1, y2 = min(xs), max(xs), min(ys), max(ys)
    return ((x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1)


def _box(values: Sequence[float]) -> tuple[float, float, float, float]:
    cx, cy, w, h = unit(values, "box")
    return (cx, cy, w, h)


def _keypoints(values: Sequence[float], ndim: int) -> list[float]:
    """x, y must be normalised; a point marked invisible (visibility 0) is only clipped, never refused."""
    out: list[float] = []
    for i in range(0, len(values), ndim):
        point = list(values[i:i + ndim])
        if ndim == 3 and point[2] == 0:
            point[:2] = [min(1.0, max(0.0, v)) for v in point[:2]]
        else:
            point[:2] = unit(point[:2], "keypoint")
        out.extend(point)
    return out


def _class_id(value: float | None, nc: int) -> int:
    if value is None:
        raise LabelError("the row is empty")
    if value != int(value):
        raise LabelError(f"class id {value:g} is not a whole number")
    if not 0 <= value < nc:
        known = f"0-{nc - 1}" if nc else "none"
        raise LabelError(f"class id {int(value)} is not in the class names (known ids: {known})")
    return int(value)
