"""Ultralytics NDJSON, as ``ultralytics.data.converter.convert_ndjson_to_yolo`` reads it.

Line 1: ``{"type": "dataset", "task", "class_names": {"0": "cat"}, "kpt_shape"?}``; then one
``{"type": "image", "file", "url"?, "width", "height", "split", "annotations": {...}}`` per line, whose
annotation rows are YOLO label rows (``boxes``/``segments``/``pose``/``obb``) or ``classification: [class_id]``.
Images must be in the upload; URLs are never fetched (no network here).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path, PurePosixPath
from typing import Any

from lanner.datasets.imports.formats.common import PlanBuilder, inside, is_image, rel
from lanner.datasets.imports.formats.labels import LabelError, LabelSpec, numbers, row_to_label
from lanner.datasets.imports.formats.untrusted import check_class_count
from lanner.datasets.records import SPLITS, TASKS, ImportedImage, ImportLimits, ImportPlan, ImportRefused, Label

ANNOTATION_KEYS = {"detect": "boxes", "segment": "segments", "pose": "pose", "obb": "obb"}
Record = tuple[int, dict[str, Any]]  # (line number, parsed line)


def plan_ndjson(path: Path, root: Path, files: list[Path], limits: ImportLimits) -> ImportPlan:
    builder = PlanBuilder(root, limits)
    name = rel(path, root)
    header, records = _read(path, name, builder, limits)
    task = header.get("task") or "detect"
    if task not in TASKS:
        raise ImportRefused(f"{name} is a {task} dataset; only {', '.join(TASKS)} can be imported.")
    names = _class_names(header, records, task, name)
    kpt_shape = _kpt_shape(header, records, name) if task == "pose" else None
    spec = LabelSpec(task=task, nc=len(names), kpt_shape=kpt_shape)
    index: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        if is_image(f):
            index[f.name].append(f)
    for line, record in records:
        file, split = record.get("file"), record.get("split")
        if not isinstance(file, str) or not file:
            builder.issue(name, f"Line {line} has no file name, so it was skipped.")
            continue
        if split not in SPLITS:
            builder.issue(name, f"Line {line} ({file}) has split {split!r}, not train, val or test, so it was skipped.")
            continue
        image, why = _locate(file, split, path, root, header, index)
        if image is None:
            builder.issue(PurePosixPath(file.replace("\\", "/")).as_posix(), f"It is listed in {name} (line {line}) "
                          f"{why}.")
            continue
        try:
            labels, class_id = _annotations(record.get("annotations"), spec)
        except LabelError as error:
            builder.issue(name, f"Line {line} ({file}): {error}, so the image was skipped.")
            continue
        builder.add(ImportedImage(name=image.name, split=split, path=image, labels=labels, class_id=class_id),
                    source=rel(image, root))
    return ImportPlan(task=task, class_names=names, images=builder.images, issues=builder.issues, format="ndjson",
                      kpt_shape=list(kpt_shape) if kpt_shape else None)


def _read(path: Path, name: str, builder: PlanBuilder, limits: ImportLimits) -> tuple[dict[str, Any], list[Record]]:
    """The dataset record and the image records, streamed line by line; unreadable lines become issues."""
    header: dict[str, Any] | None = None
    records: list[Record] = []
    with path.open(encoding="utf-8-sig", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                value = None
            if header is None:
                if not isinstance(value, dict) or value.get("type") != "dataset":
                    raise ImportRefused(f"{name} does not start with an NDJSON dataset record "
                                        '({"type": "dataset", ...}).')
                header = value
            elif not isinstance(value, dict) or value.get("type", "image") != "image":
                builder.issue(name, f"Line {number} is not an image record, so it was skipped.")
            else:
                records.append((number, value))
                if len(records) > limits.max_files:
                    raise ImportRefused(f"{name} lists more than {limits.max_files} images.")
    if header is None:
        raise ImportRefused(f"{name} is empty.")
    return header, records


def _rows(annotations: object, task: str) -> list[Any] | None:
    """The rows for ``task``: its own key, else the first key, as the Ultralytics converter takes the first."""
    if not isinstance(annotations, dict):
        return None
    key = ANNOTATION_KEYS.get(task)
    rows = annotations[key] if key in annotations else next(iter(annotations.values()), [])
    return rows if isinstance(rows, list) else None


def _annotations(annotations: object, spec: LabelSpec) -> tuple[list[Label] | None, int | None]:
    """(labels, class_id); no ``annotations`` key means unlabelled (None), an empty one means no objects ([])."""
    if annotations is None:
        return None, None
    if not isinstance(annotations, dict):
        raise LabelError("annotations is not an object")
    if spec.task == "classify":
        value = annotations.get("classification")
        if not value:
            return None, None
        class_id = value[0] if isinstance(value, list) else value
        if isinstance(class_id, bool) or not isinstance(class_id, int) or not 0 <= class_id < spec.nc:
            raise LabelError(f"classification {class_id!r} is not a known class id")
        return None, class_id
    rows = _rows(annotations, spec.task)
    if rows is None:
        raise LabelError("annotation rows are not a list")
    labels = []
    for i, row in enumerate(rows, start=1):
        try:
            labels.append(row_to_label(numbers(row if isinstance(row, list) else [row]), spec))
        except LabelError as error:
            raise LabelError(f"annotation {i}: {error}") from None
    return labels, None


def _class_names(header: dict[str, Any], records: list[Record], task: str, name: str) -> list[str]:
    """``class_names`` with gaps filled (``class3``); none at all → inferred from the largest class id used."""
    raw = header.get("class_names") or {}
    try:
        keyed = {int(k): str(v) for k, v in (raw.items() if isinstance(raw, dict) else enumerate(raw))}
    except (TypeError, ValueError):
        raise ImportRefused(f"{name} class_names keys must be class ids.") from None
    if any(k < 0 for k in keyed):
        raise ImportRefused(f"{name} class_names keys must not be negative.")
    count = max(keyed) + 1 if keyed else _largest_class(records, task) + 1
    check_class_count(count, name)  # {"1000000000000": "x"} must not fill a trillion gaps
    return [keyed.get(i, f"class{i}") for i in range(count)]


def _largest_class(records: list[Record], task: str) -> int:
    largest = -1
    for _, record in records:
        annotations = record.get("annotations")
        if task == "classify":
            value = annotations.get("classification") if isinstance(annotations, dict) else None
            candidates = value[:1] if isinstance(value, list) else []
        else:
            candidates = [row[0] for row in _rows(annotations, task) or [] if isinstance(row, list) and row]
        for c in candidates:
            if isinstance(c, int | float) and not isinstance(c, bool) and c == int(c):
                largest = max(largest, int(c))
    return min(largest, 9999)  # a typo'd id must not create millions of names


def _kpt_shape(header: dict[str, Any], records: list[Record], name: str) -> tuple[int, int]:
    """``kpt_shape`` from the dataset record, else inferred from pose rows as Ultralytics does."""
    value = header.get("kpt_shape")
    if value is not None:
        if (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)
                and value[0] >= 1 and value[1] in (2, 3)):
            return (value[0], value[1])
        raise ImportRefused(f"{name} kpt_shape must be [number of keypoints, 2 or 3], not {value!r}.")
    samples = [row[5:] for _, r in records for row in _rows(r.get("annotations"), "pose") or []
               if isinstance(row, list) and len(row) > 5][:50]
    lengths = {len(s) for s in samples}
    if len(lengths) == 1:
        (length,) = lengths
        if length % 3 == 0 and all(v in (0, 1, 2) for s in samples for v in s[2::3]):
            return (length // 3, 3)
        if length % 2 == 0 and length % 3 != 0:  # divisible by 3 but failing the visibility test: ambiguous
            return (length // 2, 2)
    raise ImportRefused(f"{name} is a pose dataset without kpt_shape, and its keypoint rows do not show one.")


def _locate(file: str, split: str, path: Path, root: Path, header: dict[str, Any],
            index: dict[str, list[Path]]) -> tuple[Path | None, str]:
    """The local image: next to the NDJSON, under its ``path``/images/<split>/, else the only file of that name."""
    name = file.replace("\\", "/")
    bases = [path.parent, root]
    if isinstance(header.get("path"), str):
        bases.append(path.parent / header["path"] / "images" / split)
    for base in bases:
        candidate = Path(os.path.normpath(base / name))
        if inside(candidate, root) and candidate.is_file() and is_image(candidate):
            return candidate, ""
    matches = index.get(PurePosixPath(name).name, [])
    if len(matches) > 1:  # prefer images/<split>/ or <split>/ folders
        matches = [m for m in matches if split in m.relative_to(root).parts[:-1]]
    if len(matches) == 1:
        return matches[0], ""
    if matches:
        return None, "but several files in the upload have that name, so it was skipped"
    return None, "but is not in the upload (URLs are not downloaded), so it was skipped"
