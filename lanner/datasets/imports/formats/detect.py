"""Which format an upload is in, decided from what it contains, then handed to that format's importer.

Order matters: a dataset YAML wins (YOLO), then NDJSON, then COCO JSON; label folders without a YAML are refused
rather than silently imported as unlabelled images; then class folders; anything else is plain images.
"""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

from lanner.datasets.imports.formats.classify import plan_classify, split_folders
from lanner.datasets.imports.formats.coco import find_coco, is_coco, plan_coco
from lanner.datasets.imports.formats.common import is_image, read_json, scan
from lanner.datasets.imports.formats.ndjson import plan_ndjson
from lanner.datasets.imports.formats.raw import plan_raw
from lanner.datasets.imports.formats.yolo import find_dataset_yaml, looks_like_yolo, plan_yolo
from lanner.datasets.records import ImportLimits, ImportPlan, ImportRefused


def plan_import(root: Path, limits: ImportLimits | None = None) -> ImportPlan:
    """Detect the format of an extracted folder (or a single .ndjson, COCO .json or image file) and parse it."""
    limits = limits or ImportLimits()
    if root.is_file():
        return _plan_file(root.resolve(), limits)
    if not root.is_dir():
        raise ImportRefused(f"{root.name} does not exist.")
    root = root.resolve()
    files = scan(root, limits)
    if found := find_dataset_yaml(root, files, limits):
        return plan_yolo(root, found[0], found[1], files, limits)
    ndjsons = [f for f in files if f.suffix.lower() == ".ndjson"]
    if len(ndjsons) > 1:
        raise ImportRefused(f"The upload has {len(ndjsons)} .ndjson files; upload one dataset at a time.")
    if ndjsons:
        return plan_ndjson(ndjsons[0], root, files, limits)
    if docs := find_coco(files, limits):
        return plan_coco(root, docs, files, limits)
    if looks_like_yolo(root, files):
        raise ImportRefused("The upload looks like a YOLO dataset (images/ and labels/ folders) but is missing "
                            "data.yaml with the class names and split folders.")
    if splits := split_folders(root, files):
        return plan_classify(root, splits, files, limits)
    return plan_raw(root, files, limits)


def _plan_file(path: Path, limits: ImportLimits) -> ImportPlan:
    """One uploaded file; images it refers to may only sit beside it (same folder)."""
    root = path.parent
    siblings = sorted(f for f in root.iterdir() if f.is_file() and not f.is_symlink() and is_image(f))
    suffix = path.suffix.lower()
    if suffix == ".ndjson":
        return plan_ndjson(path, root, siblings, limits)
    if suffix == ".json":
        try:
            data = read_json(path, limits)
        except (ValueError, UnicodeDecodeError) as error:
            raise ImportRefused(f"{path.name} is not valid JSON: {error}") from error
        if not is_coco(data):
            raise ImportRefused(f"{path.name} is not COCO JSON (it needs images, annotations and categories lists).")
        return plan_coco(root, [(path, data)], siblings, limits)
    if is_image(path):
        return plan_raw(root, [path], limits)
    if zipfile.is_zipfile(path) or tarfile.is_tarfile(path):
        raise ImportRefused(f"{path.name} is an archive; unpack it with extract_archive first.")
    raise ImportRefused(f"{path.name} is not a supported upload (zip, tar, .ndjson, COCO .json or an image).")
