"""What every importer shares: walking an upload, naming files inside it, and collecting images and issues.

Importers never trust the folder they are given: symlinks are not followed, hidden files and macOS junk are
skipped, and every path handed back stays inside the upload root.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lanner.datasets.records import IMAGE_SUFFIXES, FileIssue, ImportedImage, ImportLimits, ImportRefused

JUNK_NAMES = frozenset({"__macosx", "thumbs.db", "desktop.ini"})
SPLIT_ALIASES = {"train": "train", "val": "val", "valid": "val", "validation": "val", "test": "test"}


def is_junk(parts: Iterable[str]) -> bool:
    """Hidden files/folders and OS droppings (``__MACOSX/``, ``.DS_Store``, ``Thumbs.db``) are never data."""
    return any(part.startswith(".") or part.lower() in JUNK_NAMES for part in parts)


def is_image(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES


def rel(path: Path, root: Path) -> str:
    """The path as the person who made the upload sees it: posix, relative to the upload root."""
    text, base = os.fspath(path), os.fspath(root)
    if os.sep == "/" and text.startswith(base + "/"):  # the common case, as a string: called per file and label
        return text[len(base) + 1:]
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def under(path: Path, folder: Path) -> bool:
    """``path.is_relative_to(folder)`` for normalised absolute paths, as one string comparison."""
    text, base = os.fspath(path), os.fspath(folder)
    return text == base or text.startswith(base.rstrip(os.sep) + os.sep)


def inside(path: Path, root: Path) -> bool:
    """True when ``path``, with ``..`` and symlinks resolved, stays under ``root``."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, ValueError):
        return False


def scan(root: Path, limits: ImportLimits) -> list[Path]:
    """Every regular file under ``root``, sorted (as paths sort: part by part); symlinks and junk are left out so
    nothing points outside. Directory entries say what they are, so no file is stat-ed."""
    found: list[str] = []
    folders = [os.fspath(root)]
    while folders:
        try:
            listing = os.scandir(folders.pop())
        except OSError:  # unreadable: skipped, as os.walk skips it
            continue
        with listing as entries:
            for entry in entries:
                if is_junk((entry.name,)) or entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    found.append(entry.path)
                    if len(found) > limits.max_files:
                        raise ImportRefused(f"The upload has more than {limits.max_files} files.")
    return [Path(p) for p in sorted(found, key=lambda p: p.split(os.sep))]


def split_of(name: str) -> str | None:
    """``train``/``val``/``test`` for a folder name, accepting the common aliases (``valid``, ``validation``)."""
    return SPLIT_ALIASES.get(name.lower())


def read_json(path: Path, limits: ImportLimits) -> Any:
    """Parse a JSON file, refusing ones too big to hold in memory safely."""
    if path.stat().st_size > limits.max_file_bytes:
        raise ImportRefused(f"{path.name} is larger than the {limits.max_file_bytes}-byte limit per file.")
    try:
        with path.open(encoding="utf-8-sig") as handle:
            return json.load(handle)
    except RecursionError:
        raise ImportRefused(f"{path.name} is nested too deeply to be a dataset file.") from None


class PlanBuilder:
    """Collects images and issues; a second image with the same (split, name) is reported and dropped."""

    def __init__(self, root: Path, limits: ImportLimits) -> None:
        self.root = root
        self.limits = limits
        self.images: list[ImportedImage] = []
        self.issues: list[FileIssue] = []
        self._seen: dict[tuple[str, str], str] = {}

    def issue(self, name: str, reason: str) -> None:
        self.issues.append(FileIssue(name=name, reason=reason))

    def add(self, image: ImportedImage, source: str | None = None) -> bool:
        """Keep ``image`` unless its (split, name) is taken; ``source`` names it in the issue."""
        source = source or rel(image.path, self.root)
        key = (image.split, image.name)
        if key in self._seen:
            self.issue(source, f"Another image named {image.name} ({self._seen[key]}) is already in the "
                               f"{image.split} split, so this one was skipped.")
            return False
        if len(self.images) >= self.limits.max_files:
            raise ImportRefused(f"The upload has more than {self.limits.max_files} images.")
        self._seen[key] = source
        self.images.append(image)
        return True
