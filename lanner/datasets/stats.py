"""``datasets.class_stats``: per-class counts and the histograms the dataset page draws."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from lanner.datasets import service
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob

GRID = 10


def _histogram(values: list[float], bins: int = 20) -> list[dict[str, float]]:
    if not values:
        return []
    low, high = min(values), max(values)
    width = (high - low) / bins or 1.0
    counts = Counter(min(int((v - low) / width), bins - 1) for v in values)
    return [{"bin": float(low + i * width), "count": float(counts.get(i, 0)), "size": float(width)}
            for i in range(bins)]


def class_stats(session: Session, dataset: Dataset) -> dict[str, Any]:
    rows = session.execute(select(DatasetItem.labels, DatasetItem.class_id, ImageBlob.width, ImageBlob.height,
                                  ImageBlob.size, ImageBlob.format)
                           .join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
                           .where(DatasetItem.manifest_id == dataset.manifest_id)
                           .execution_options(yield_per=5000))
    instances: Counter[int] = Counter()
    images_with: Counter[int] = Counter()
    widths, heights, sizes, per_image, points = [], [], [], [], []
    box_w, box_h, box_wn, box_hn = [], [], [], []
    formats: Counter[str] = Counter()
    location = [[0.0] * GRID for _ in range(GRID)]
    for labels, class_id, width, height, size, fmt in rows:
        widths.append(float(width))
        heights.append(float(height))
        sizes.append(float(size))
        formats[fmt] += 1
        per_image.append(float(len(labels or [])))
        seen = set()
        if class_id is not None:
            instances[class_id] += 1
            seen.add(class_id)
        for label in labels or []:
            cid = int(label["classId"])
            instances[cid] += 1
            seen.add(cid)
            if label.get("segments"):
                points.append(float(len(label["segments"]) // 2))
            box = label.get("bbox")
            if box:
                cx, cy, w, h = box
                box_wn.append(float(w))
                box_hn.append(float(h))
                box_w.append(float(w * width))
                box_h.append(float(h * height))
                location[min(int(cy * GRID), GRID - 1)][min(int(cx * GRID), GRID - 1)] += 1
        for cid in seen:
            images_with[cid] += 1
    n_classes = max(len(dataset.class_names or []), max(instances, default=-1) + 1)
    dims = [[0.0] * GRID for _ in range(GRID)]
    min_w, max_w = (min(widths), max(widths)) if widths else (0.0, 0.0)
    min_h, max_h = (min(heights), max(heights)) if heights else (0.0, 0.0)
    for w, h in zip(widths, heights, strict=True):
        x = min(int((w - min_w) / ((max_w - min_w) or 1) * GRID), GRID - 1)
        y = min(int((h - min_h) / ((max_h - min_h) or 1) * GRID), GRID - 1)
        dims[y][x] += 1
    return {
        "classes": [{"classId": float(c), "count": float(instances.get(c, 0)),
                     "imageCount": float(images_with.get(c, 0))} for c in range(n_classes)],
        "imageStats": {
            "widthHistogram": _histogram(widths), "heightHistogram": _histogram(heights),
            "pointsHistogram": _histogram(points), "formatDistribution": {k: float(v) for k, v in formats.items()},
            "fileSizeHistogram": _histogram(sizes), "objectsPerImageHistogram": _histogram(per_image),
            "bboxWidthHistogram": _histogram(box_w), "bboxHeightHistogram": _histogram(box_h),
            "bboxWidthNormHistogram": _histogram(box_wn), "bboxHeightNormHistogram": _histogram(box_hn),
        },
        "locationHeatmap": {"bins": location, "maxCount": max((max(r) for r in location), default=0.0)},
        "dimensionHeatmap": {"bins": dims, "maxCount": max((max(r) for r in dims), default=0.0),
                             "minWidth": min_w, "maxWidth": max_w, "minHeight": min_h, "maxHeight": max_h},
        "classNames": [str(n) for n in dataset.class_names or []],
        "cached": False,
        "sampleSize": None,
    }


def images_per_class(session: Session, manifest_id: int, n_classes: int) -> list[int]:
    """How many images of a manifest have each class, from the derived item columns (one aggregate query, no
    label JSON read): what a version compare shows per class."""
    if n_classes <= 0:
        return []
    columns = [func.sum(case(((DatasetItem.class_mask.op("&")(1 << i)) != 0, 1), else_=0))
               if i < service.MASK_CLASSES else
               func.sum(case((DatasetItem.class_list.like(f"%,{i},%"), 1), else_=0)) for i in range(n_classes)]
    row = session.execute(select(*columns).where(DatasetItem.manifest_id == manifest_id)).one()
    return [int(v or 0) for v in row]
