"""Plain records shared by importers, image probing, health checks and the dataset service.

Labels are kept normalised per image, in YOLO conventions (all coordinates in [0, 1] of the image size):
- detect:   ``box`` = (cx, cy, w, h)
- segment:  ``polygon`` = [x1, y1, x2, y2, ...] (>= 3 points) and ``box`` = its bounding box
- pose:     ``box`` = (cx, cy, w, h) and ``keypoints`` = [x, y, v, x, y, v, ...] (or [x, y, ...] when ndim 2)
- obb:      ``obb`` = [x1, y1, x2, y2, x3, y3, x4, y4] and ``box`` = its axis-aligned bounding box
- classify: no labels; the image's ``class_id`` says its class
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lanner.config import Settings
from lanner.errors import Unprocessable

TASKS = ("detect", "segment", "pose", "obb", "classify")
SPLITS = ("train", "val", "test")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")


@dataclass
class Label:
    class_id: int
    box: tuple[float, float, float, float] | None = None
    polygon: list[float] | None = None
    keypoints: list[float] | None = None
    obb: list[float] | None = None

    def to_json(self) -> dict:
        """Wire/storage shape: ``{"classId", "bbox"?, "segments"?, "keypoints"?, "obb"?}``."""
        out: dict = {"classId": self.class_id}
        if self.box is not None:
            out["bbox"] = list(self.box)
        if self.polygon is not None:
            out["segments"] = list(self.polygon)
        if self.keypoints is not None:
            out["keypoints"] = list(self.keypoints)
        if self.obb is not None:
            out["obb"] = list(self.obb)
        return out

    @classmethod
    def from_json(cls, data: dict) -> Label:
        box = data.get("bbox")
        return cls(class_id=int(data["classId"]), box=tuple(box) if box is not None else None,  # type: ignore[arg-type]
                   polygon=data.get("segments"), keypoints=data.get("keypoints"), obb=data.get("obb"))


@dataclass
class ImportedImage:
    """One image found in an upload, not yet stored. ``path`` is a file on local disk (extracted)."""

    name: str                       # file name as the dataset will know it, e.g. "img_001.jpg" (no folders)
    split: str                      # train | val | test
    path: Path
    labels: list[Label] | None      # None: no label file at all (unlabelled); []: labelled, no objects
    class_id: int | None = None     # classification datasets


@dataclass
class FileIssue:
    name: str                       # path inside the upload, e.g. "labels/train/a.txt"
    reason: str                     # one sentence a person understands


@dataclass
class ImportPlan:
    """What an importer understood of an upload: the images to store and what it had to skip."""

    task: str
    class_names: list[str]
    images: list[ImportedImage]
    issues: list[FileIssue] = field(default_factory=list)
    format: str = "yolo"            # yolo | coco | ndjson | raw (the SDK's ``format`` literal)
    kpt_shape: list[int] | None = None


class ImportRefused(Unprocessable):
    """The upload as a whole cannot be understood or is unsafe; nothing is stored."""


@dataclass(frozen=True)
class ImportLimits:
    """Defences against archive bombs; every value is configurable (``LANNER_IMPORT_*``)."""

    max_total_bytes: int = 50 * 1024**3       # unpacked size of all members
    max_files: int = 1_000_000
    max_ratio: float = 200.0                  # uncompressed / compressed, per member and overall
    max_file_bytes: int = 2 * 1024**3         # one member

    @classmethod
    def from_settings(cls, settings: Settings) -> ImportLimits:
        return cls(max_total_bytes=settings.import_max_bytes, max_files=settings.import_max_files,
                   max_ratio=settings.import_max_ratio, max_file_bytes=settings.import_max_file_bytes)


@dataclass
class ImageInfo:
    """What probing an image file found (see ``datasets/images.py``)."""

    sha256: str
    size: int
    width: int
    height: int
    format: str                     # jpeg | png | bmp | webp | tiff
    phash: int                      # 64-bit perceptual hash (DCT-based), for near-duplicate search


class CorruptImage(Exception):
    """Not an image, truncated, or undecodable; the message says which."""
