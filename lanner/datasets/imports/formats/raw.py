"""Unlabelled images: a folder, zip or single file with no YAML, JSON or class folders.

Every image goes to the train split with no labels; the task is detect until someone labels them.
"""

from __future__ import annotations

from pathlib import Path

from lanner.datasets.imports.formats.common import PlanBuilder, is_image
from lanner.datasets.records import ImportedImage, ImportLimits, ImportPlan, ImportRefused


def plan_raw(root: Path, files: list[Path], limits: ImportLimits) -> ImportPlan:
    builder = PlanBuilder(root, limits)
    for f in files:
        if is_image(f):
            builder.add(ImportedImage(name=f.name, split="train", path=f, labels=None))
    if not builder.images:
        raise ImportRefused("The upload has no images, and no data.yaml, COCO JSON or NDJSON file.")
    return ImportPlan(task="detect", class_names=[], images=builder.images, issues=builder.issues, format="raw")
