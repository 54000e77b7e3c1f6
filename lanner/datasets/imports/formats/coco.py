"""COCO instance JSON (``images``, ``annotations``, ``categories``) into normalised YOLO-style labels.

Follows ``ultralytics.data.converter.convert_coco``: pixel boxes ``x, y, w, h`` become centre boxes divided by the
image entry's size, crowd annotations are skipped, and a segment dataset gives box-only annotations a box-shaped
polygon. Category ids are arbitrary, so they map to 0..N-1 in sorted id order. RLE masks are not decoded here.
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from lanner.datasets.imports.formats.common import PlanBuilder, inside, is_image, read_json, rel
from lanner.datasets.imports.formats.labels import LabelError, bounding_box, numbers, unit
from lanner.datasets.records import ImportedImage, ImportLimits, ImportPlan, Label

COCO_KEYS = ("images", "annotations", "categories")
_SPLIT = re.compile(r"train|val|test")
_SKIPPED = {
    "rle": "annotation(s) are RLE masks, which are not imported, so they were skipped.",
    "crowd": "crowd annotation(s) (iscrowd: 1) were skipped, as Ultralytics skips them.",
    "empty": "annotation(s) have neither a polygon nor a box with positive size, so they were skipped.",
    "orphan": "annotation(s) refer to image ids that are not in images, so they were skipped.",
    "category": "category entry(s) without an integer id were ignored.",
}
Doc = tuple[Path, dict[str, Any]]


@dataclass
class _Ann:
    class_id: int
    box: tuple[float, float, float, float] | None
    polygon: list[float] | None


def is_coco(data: object) -> bool:
    return isinstance(data, dict) and all(isinstance(data.get(k), list) for k in COCO_KEYS)


def find_coco(files: list[Path], limits: ImportLimits) -> list[Doc]:
    """Every COCO JSON in the upload; when ``instances*`` files exist, only those (not keypoints/captions)."""
    docs: list[Doc] = []
    for f in files:
        if f.suffix.lower() == ".json":
            try:
                data = read_json(f, limits)
            except (ValueError, UnicodeDecodeError):
                continue
            if is_coco(data):
                docs.append((f, data))
    return [d for d in docs if "instances" in d[0].name.lower()] or docs


def split_for(json_path: Path, root: Path) -> str:
    """train/val/test from the file name (``instances_val2017``), else its folders (``valid/``), else train."""
    for name in (json_path.stem, *reversed(json_path.relative_to(root).parts[:-1])):
        if match := _SPLIT.search(name.lower()):
            return match.group()
    return "train"


def plan_coco(root: Path, docs: list[Doc], files: list[Path], limits: ImportLimits) -> ImportPlan:
    builder = PlanBuilder(root, limits)
    index: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        if is_image(f):
            index[f.name].append(f)
    class_of, names = _categories(root, docs, builder)
    pending: list[tuple[str, Path, list[_Ann]]] = []
    for path, data in docs:
        pending += _images(root, path, data, class_of, index, builder)
    task = "segment" if any(a.polygon for *_, anns in pending for a in anns) else "detect"
    for split, image, anns in pending:
        builder.add(ImportedImage(name=image.name, split=split, path=image, labels=[_label(a, task) for a in anns]))
    return ImportPlan(task=task, class_names=names, images=builder.images, issues=builder.issues, format="coco")


def _categories(root: Path, docs: list[Doc], builder: PlanBuilder) -> tuple[dict[int, int], list[str]]:
    found: dict[int, str] = {}
    for path, data in docs:
        bad = 0
        for category in data["categories"]:
            try:
                cid = int(category["id"])
            except (TypeError, KeyError, ValueError):
                bad += 1
                continue
            name = str(category.get("name", cid))
            if found.setdefault(cid, name) != name:
                builder.issue(rel(path, root), f"Category {cid} is named {name} here but {found[cid]} elsewhere; "
                                               f"{found[cid]} was kept.")
        if bad:
            builder.issue(rel(path, root), f"{bad} {_SKIPPED['category']}")
    ids = sorted(found)
    return {cid: i for i, cid in enumerate(ids)}, [found[cid] for cid in ids]


def _images(root: Path, path: Path, data: dict[str, Any], class_of: dict[int, int], index: dict[str, list[Path]],
            builder: PlanBuilder) -> list[tuple[str, Path, list[_Ann]]]:
    split, json_name = split_for(path, root), rel(path, root)
    by_image: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for ann in data["annotations"]:
        if isinstance(ann, dict):
            by_image[_key(ann.get("image_id"))].append(ann)
    counts: Counter[str] = Counter()
    known: set[Any] = set()
    out: list[tuple[str, Path, list[_Ann]]] = []
    for entry in data["images"]:
        entry = entry if isinstance(entry, dict) else {}
        known.add(_key(entry.get("id")))
        file_name, width, height = entry.get("file_name"), entry.get("width"), entry.get("height")
        if not isinstance(file_name, str) or not file_name:
            builder.issue(json_name, f"Image entry {entry.get('id')!r} has no file_name, so it was skipped.")
            continue
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in (width, height)):
            builder.issue(json_name, f"Image entry {file_name} has no positive width and height, so it was skipped.")
            continue
        image, why = _locate(file_name, path, root, split, index)
        if image is None:
            builder.issue(PurePosixPath(file_name.replace("\\", "/")).as_posix(), f"It is listed in {json_name} {why}.")
            continue
        try:
            anns = [a for ann in by_image.get(_key(entry.get("id")), [])
                    if (a := _annotation(ann, float(width), float(height), class_of, counts)) is not None]
        except LabelError as error:
            builder.issue(rel(image, root), f"In {json_name}, {error}, so the image was skipped.")
            continue
        out.append((split, image, anns))
    counts["orphan"] = sum(len(anns) for key, anns in by_image.items() if key not in known)
    for kind, count in counts.items():
        if count:
            builder.issue(json_name, f"{count} {_SKIPPED[kind]}")
    return out


def _key(value: Any) -> Any:
    """Image ids as dictionary keys (ids are usually ints; unhashable junk becomes its repr)."""
    return value if isinstance(value, int | str) else repr(value)


def _locate(file_name: str, json_path: Path, root: Path, split: str,
            index: dict[str, list[Path]]) -> tuple[Path | None, str]:
    """The image on disk: ``file_name`` relative to the usual folders, else the only file with that name."""
    name = file_name.replace("\\", "/")
    here = json_path.parent
    for base in (here, here.parent, root, root / "images", root / "images" / split, root / split, here / "images"):
        candidate = Path(os.path.normpath(base / name))
        if inside(candidate, root) and candidate.is_file() and is_image(candidate):
            return candidate, ""
    matches = index.get(PurePosixPath(name).name, [])
    if len(matches) > 1:  # prefer the one under a folder named like the split (train2017/, valid/, ...)
        matches = [m for m in matches if any(p.lower().startswith(split) for p in m.relative_to(root).parts[:-1])]
    if len(matches) == 1:
        return matches[0], ""
    if matches:
        return None, "but several files in the upload have that name, so it was skipped"
    return None, "but is not in the upload, so it was skipped"


def _annotation(ann: dict[str, Any], width: float, height: float, class_of: dict[int, int],
                counts: Counter[str]) -> _Ann | None:
    """One annotation normalised, or None when skipped (counted); a bad class or coordinate raises LabelError."""
    segmentation = ann.get("segmentation")
    if isinstance(segmentation, dict):
        counts["rle"] += 1
        return None
    if ann.get("iscrowd"):
        counts["crowd"] += 1
        return None
    ident = ann.get("id", "?")
    try:
        class_id = class_of[int(ann.get("category_id"))]  # type: ignore[arg-type]
    except (TypeError, KeyError, ValueError):
        raise LabelError(f"annotation {ident} uses category_id {ann.get('category_id')!r}, which is not in "
                         "categories") from None
    try:
        polygon = _polygon(segmentation, width, height)
        box = _box(ann.get("bbox"), width, height)
    except LabelError as error:
        raise LabelError(f"annotation {ident}: {error}") from None
    if polygon is None and box is None:
        counts["empty"] += 1
        return None
    return _Ann(class_id, box, polygon)


def _polygon(segmentation: object, width: float, height: float) -> list[float] | None:
    """The largest polygon (by area) of a polygon-list segmentation, normalised."""
    if not isinstance(segmentation, list):
        return None
    polygons = [numbers(p) for p in segmentation if isinstance(p, list) and len(p) >= 6 and len(p) % 2 == 0]
    if not polygons:
        return None
    largest = max(polygons, key=_area)
    return unit([v / (width if i % 2 == 0 else height) for i, v in enumerate(largest)], "polygon")


def _area(points: list[float]) -> float:
    xs, ys = points[0::2], points[1::2]
    return abs(sum(xs[i] * ys[i - 1] - xs[i - 1] * ys[i] for i in range(len(xs)))) / 2


def _box(bbox: object, width: float, height: float) -> tuple[float, float, float, float] | None:
    if not isinstance(bbox, list) or len(bbox) != 4:
        return None
    x, y, w, h = numbers(bbox)
    if w <= 0 or h <= 0:
        return None
    cx, cy, bw, bh = unit([(x + w / 2) / width, (y + h / 2) / height, w / width, h / height], "box")
    return (cx, cy, bw, bh)


def _label(ann: _Ann, task: str) -> Label:
    if task == "segment":
        if ann.polygon is None:  # box-only annotation in a segment dataset: a box-shaped polygon, as convert_coco
            cx, cy, w, h = ann.box  # type: ignore[misc]
            x1, y1, x2, y2 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
            polygon = [min(1.0, max(0.0, v)) for v in (x1, y1, x2, y1, x2, y2, x1, y2)]
        else:
            polygon = ann.polygon
        return Label(ann.class_id, box=bounding_box(polygon), polygon=polygon)
    return Label(ann.class_id, box=ann.box if ann.box is not None else bounding_box(ann.polygon or []))
