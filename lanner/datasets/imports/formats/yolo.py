"""YOLO detect/segment/pose/obb datasets: a data.yaml naming classes and split folders, a .txt label per image.

Paths resolve as ``ultralytics.data.utils.check_det_dataset`` resolves them (relative to ``path:`` or the YAML's
folder, a missing ``../x`` retried as ``x``), and labels are found as ``img2label_paths`` finds them (the last
``/images/`` becomes ``/labels/``), but nothing may point outside the upload.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from lanner.datasets.imports.formats.common import PlanBuilder, inside, is_image, rel, under
from lanner.datasets.imports.formats.labels import LabelError, LabelSpec, infer_task, numbers, row_to_label
from lanner.datasets.imports.formats.untrusted import MAX_CLASS_NAME, check_class_count, load_yaml
from lanner.datasets.records import ImportedImage, ImportLimits, ImportPlan, ImportRefused, Label

YAML_SUFFIXES = (".yaml", ".yml")
YOLO_TASKS = ("detect", "segment", "pose", "obb")
SPLIT_KEYS = (("train", "train"), ("val", "val"), ("validation", "val"), ("test", "test"))
Rows = list[tuple[int, list[float]]]  # (line number, values)


def find_dataset_yaml(root: Path, files: list[Path], limits: ImportLimits) -> tuple[Path, dict[str, Any]] | None:
    """The dataset YAML (one with ``names`` or ``nc``): at the root first, else the only one deeper down."""
    candidates = [f for f in files if f.suffix.lower() in YAML_SUFFIXES]
    for group in ([f for f in candidates if f.parent == root], [f for f in candidates if f.parent != root]):
        found = [(f, d) for f in group if (d := _load_yaml(f, root, limits)) is not None]
        if len(found) > 1:
            found = [(f, d) for f, d in found if f.stem.lower() == "data"] or found
        if len(found) > 1:
            listed = ", ".join(rel(f, root) for f, _ in found)
            raise ImportRefused(f"The upload has several dataset YAML files ({listed}); keep only data.yaml.")
        if found:
            return found[0]
    return None


def looks_like_yolo(root: Path, files: list[Path]) -> bool:
    """Label .txt files under a ``labels`` folder with an ``images`` sibling: a YOLO layout (missing its YAML)."""
    for f in files:
        if f.suffix.lower() != ".txt":
            continue
        parts = f.relative_to(root).parts[:-1]
        for i, part in enumerate(parts):
            if part == "labels" and root.joinpath(*parts[:i], "images").is_dir():
                return True
    return False


def label_path(image: Path, root: Path) -> Path:
    """Ultralytics' ``img2label_paths`` on the path inside the upload: last ``/images/`` → ``/labels/``, ``.txt``."""
    inner = "/" + rel(image, root)
    if "/images/" in inner:
        inner = "/labels/".join(inner.rsplit("/images/", 1))
    return root / (inner.rsplit(".", 1)[0] + ".txt").lstrip("/")


def plan_yolo(root: Path, yaml_path: Path, data: dict[str, Any], files: list[Path],
              limits: ImportLimits) -> ImportPlan:
    yaml_name = rel(yaml_path, root)
    names = _class_names(data, yaml_name)
    kpt_shape = _kpt_shape(data, yaml_name)
    declared = data.get("task")
    if declared is not None and declared not in YOLO_TASKS:
        raise ImportRefused(f"{yaml_name} says task: {declared}; a data.yaml dataset must be detect, segment, "
                            "pose or obb.")
    if declared == "pose" and kpt_shape is None:
        raise ImportRefused(f"{yaml_name} is a pose dataset but has no kpt_shape: [keypoints, 2 or 3].")
    builder = PlanBuilder(root, limits)
    entries = _split_entries(root, yaml_path, data, files, builder)

    read: list[tuple[str, Path, Path, Rows | None]] = []
    for split, image in entries:
        lbl = label_path(image, root)
        try:
            rows = _read_rows(lbl, limits) if lbl.is_file() else None
        except LabelError as error:
            builder.issue(rel(lbl, root), f"{error}, so image {rel(image, root)} was skipped.")
            continue
        read.append((split, image, lbl, rows))

    task = declared or infer_task({len(v) for *_, rows in read for _, v in rows or []}, kpt_shape)
    spec = LabelSpec(task=task, nc=len(names), kpt_shape=kpt_shape)
    for split, image, lbl, rows in read:
        labels: list[Label] | None = None
        if rows is not None:
            try:
                labels = [_convert(line, values, spec) for line, values in rows]
            except LabelError as error:
                builder.issue(rel(lbl, root), f"{error}, so image {rel(image, root)} was skipped.")
                continue
        builder.add(ImportedImage(name=image.name, split=split, path=image, labels=labels))
    return ImportPlan(task=task, class_names=names, images=builder.images, issues=builder.issues, format="yolo",
                      kpt_shape=list(kpt_shape) if task == "pose" and kpt_shape else None)


def _convert(line: int, values: list[float], spec: LabelSpec) -> Label:
    try:
        return row_to_label(values, spec)
    except LabelError as error:
        raise LabelError(f"Line {line}: {error}") from None


def _read_rows(path: Path, limits: ImportLimits) -> Rows:
    if path.stat().st_size > limits.max_file_bytes:
        raise LabelError(f"The label file is larger than {limits.max_file_bytes} bytes")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise LabelError("The label file is not UTF-8 text") from None
    rows: Rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append((number, numbers(line.split())))
            except LabelError as error:
                raise LabelError(f"Line {number}: {error}") from None
    return rows


def _load_yaml(path: Path, root: Path, limits: ImportLimits) -> dict[str, Any] | None:
    """The parsed YAML if it describes a dataset; a broken data.yaml is refused, other broken YAML ignored."""
    if path.stat().st_size > min(limits.max_file_bytes, 16 * 1024**2):
        return None
    try:
        data = load_yaml(path.read_text(encoding="utf-8-sig"), rel(path, root))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        if path.stem.lower() == "data":
            raise ImportRefused(f"{rel(path, root)} is not valid YAML: {error}") from error
        return None
    if isinstance(data, dict) and (data.get("names") is not None or data.get("nc") is not None):
        return data
    if path.stem.lower() == "data" and path.parent == root:
        raise ImportRefused(f"{rel(path, root)} has no names: the list of class names is required.")
    return None


def _class_names(data: dict[str, Any], yaml_name: str) -> list[str]:
    names, nc = data.get("names"), data.get("nc")
    check_class_count(len(names) if isinstance(names, list | dict) else 0, yaml_name)
    if isinstance(nc, int):
        check_class_count(nc, yaml_name)
    if isinstance(names, list):
        result = [str(n) for n in names]
    elif isinstance(names, dict):
        try:
            keyed = {int(k): str(v) for k, v in names.items()}
        except (TypeError, ValueError):
            raise ImportRefused(f"{yaml_name} has names keys that are not class ids.") from None
        if sorted(keyed) != list(range(len(keyed))):
            raise ImportRefused(f"{yaml_name} names keys must be 0 to {len(keyed) - 1} without gaps.")
        result = [keyed[i] for i in range(len(keyed))]
    elif names is None and isinstance(nc, int) and nc >= 0:
        return [f"class_{i}" for i in range(nc)]
    else:
        raise ImportRefused(f"{yaml_name} names must be a list or a mapping of class id to name.")
    if isinstance(nc, int) and nc != len(result):
        raise ImportRefused(f"{yaml_name} has nc: {nc} but {len(result)} names.")
    if any(len(name) > MAX_CLASS_NAME for name in result):
        raise ImportRefused(f"{yaml_name} has a class name longer than {MAX_CLASS_NAME} characters.")
    return result


def _kpt_shape(data: dict[str, Any], yaml_name: str) -> tuple[int, int] | None:
    value = data.get("kpt_shape")
    if value is None:
        return None
    if (not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, int) for v in value)
            or value[0] < 1 or value[1] not in (2, 3)):
        raise ImportRefused(f"{yaml_name} kpt_shape must be [number of keypoints, 2 or 3], not {value!r}.")
    return (value[0], value[1])


def _base(root: Path, yaml_path: Path, data: dict[str, Any]) -> Path:
    """``path:`` if it names a folder inside the upload; otherwise (absent, absolute elsewhere) the YAML's folder."""
    value = data.get("path")
    if isinstance(value, str) and value.strip():
        candidate = Path(os.path.normpath(yaml_path.parent / value))
        if candidate.is_dir() and inside(candidate, root):
            return candidate
    return yaml_path.parent


def _split_entries(root: Path, yaml_path: Path, data: dict[str, Any], files: list[Path],
                   builder: PlanBuilder) -> list[tuple[str, Path]]:
    """(split, image) for every image the YAML's train/val/test entries point at."""
    base, yaml_name = _base(root, yaml_path, data), rel(yaml_path, root)
    entries: list[tuple[str, Path]] = []
    listed = False
    for key, split in SPLIT_KEYS:
        value = data.get(key)
        if not value or (key == "validation" and data.get("val")):
            continue
        listed = True
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str):
                builder.issue(yaml_name, f"{key}: {item!r} is not a path, so it was ignored.")
                continue
            entries += [(split, image) for image in _resolve_split(item, key, base, root, files, builder, yaml_name)]
    if not listed:
        raise ImportRefused(f"{yaml_name} lists no train, val or test image folders.")
    return entries


def _resolve_split(item: str, key: str, base: Path, root: Path, files: list[Path], builder: PlanBuilder,
                   yaml_name: str) -> list[Path]:
    path = Path(os.path.normpath(base / item))
    if not path.exists() and item.startswith("../"):  # Roboflow exports, as check_det_dataset retries them
        path = Path(os.path.normpath(base / item[3:]))
    if not inside(path, root):
        builder.issue(yaml_name, f"{key}: {item} points outside the upload, so it was ignored.")
        return []
    if path.is_dir():
        return [f for f in files if is_image(f) and under(f, path)]
    if path.is_file() and path.suffix.lower() == ".txt":
        return _image_list(path, base, root, builder)
    if path.is_file() and is_image(path):
        return [path]
    builder.issue(yaml_name, f"{key}: {item} is not in the upload, so that split has no images from it.")
    return []


def _image_list(txt: Path, base: Path, root: Path, builder: PlanBuilder) -> list[Path]:
    """A .txt split: one image per line, ``./x`` relative to the list, other relative paths to the dataset root."""
    images: list[Path] = []
    for number, line in enumerate(txt.read_text(encoding="utf-8-sig", errors="replace").splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        path = Path(os.path.normpath(txt.parent / line[2:] if line.startswith("./") else base / line))
        if inside(path, root) and path.is_file() and is_image(path):
            images.append(path)
        else:
            builder.issue(rel(txt, root), f"Line {number}: {line} is not an image in the upload, so it was skipped.")
    return images
