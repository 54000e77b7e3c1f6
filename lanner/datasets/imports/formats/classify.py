"""Classification folders, ImageNet style as Ultralytics trains on them: ``{train,val,test}/{class}/*.jpg``.

There is no YAML; a class is a folder name, and the class list is the sorted union over all splits so the same
name gets the same id everywhere.
"""

from __future__ import annotations

from pathlib import Path

from lanner.datasets.imports.formats.common import PlanBuilder, is_image, is_junk, rel, split_of
from lanner.datasets.records import ImportedImage, ImportLimits, ImportPlan


def split_folders(root: Path, files: list[Path]) -> dict[Path, str]:
    """Top-level split folders (train/val/test, also valid/validation) that hold images inside class folders."""
    found: dict[Path, str] = {}
    for f in files:
        parts = f.relative_to(root).parts
        if len(parts) >= 3 and (split := split_of(parts[0])) and is_image(f):
            found[root / parts[0]] = split
    return found


def plan_classify(root: Path, splits: dict[Path, str], files: list[Path], limits: ImportLimits) -> ImportPlan:
    builder = PlanBuilder(root, limits)
    class_names = sorted({d.name for folder in splits for d in folder.iterdir()
                          if d.is_dir() and not d.is_symlink() and not is_junk((d.name,))})
    ids = {name: i for i, name in enumerate(class_names)}
    for f in files:
        parts = f.relative_to(root).parts
        split = splits.get(root / parts[0])
        if split is None or not is_image(f):
            continue
        if len(parts) < 3:
            builder.issue(rel(f, root), f"The image is not inside a class folder of {parts[0]}/, so it was skipped.")
            continue
        builder.add(ImportedImage(name=f.name, split=split, path=f, labels=None, class_id=ids[parts[1]]))
    return ImportPlan(task="classify", class_names=class_names, images=builder.images, issues=builder.issues,
                      format="yolo")
