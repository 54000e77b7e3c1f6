"""Dataset importers: unpack an upload safely, recognise its format, and list the images and labels in it.

``extract_archive`` turns an uploaded .zip/.tar into a folder; ``plan_import`` reads a folder (or a single
.ndjson, COCO .json or image) as YOLO, classification folders, COCO, NDJSON or plain images and returns an
``ImportPlan``. Nothing is stored here; per-file problems are ``FileIssue``s, unusable uploads ``ImportRefused``.
"""

from lanner.datasets.imports.formats.archive import extract_archive
from lanner.datasets.imports.formats.detect import plan_import

__all__ = ["extract_archive", "plan_import"]
