"""Import pipeline: an upload (archive, NDJSON, COCO JSON, folder) becomes dataset items, all or nothing.

Stages: unpack safely (``formats.extract_archive``), understand the layout (``formats.plan_import``), probe
and store every image (hash, size, thumbnail; content-addressed, so an image already stored is not stored
again), then one transaction that builds a new manifest (the current one plus the new items) and swaps it in.
A failure anywhere leaves the dataset's content as it was; a queued import (``jobs``) then marks it failed,
with the reason. Nothing here takes the app context: a session, the blob store and the settings are enough.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from lanner.config import Settings
from lanner.datasets import service, state
from lanner.datasets.health.report import refresh_health
from lanner.datasets.images import probe_image
from lanner.datasets.imports.formats import extract_archive, plan_import
from lanner.datasets.imports.probe_pool import Prober
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.datasets.records import (
    FileIssue,
    ImageInfo,
    ImportedImage,
    ImportLimits,
    ImportPlan,
    ImportRefused,
)
from lanner.db import utcnow
from lanner.scratch import scratch_folder
from lanner.storage.blobs import BlobStore

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
INSERT_CHUNK = 5000  # rows per executemany: the parameters of one chunk are all that is held at once
Progress = Callable[[str, int, int], None]  # (stage, done, total): each stage ends with done == total


@dataclass
class IngestResult:
    added: int = 0
    issues: list[FileIssue] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, name: str, reason: str, code: str) -> None:
        self.issues.append(FileIssue(name, reason))
        self.skipped[code] = self.skipped.get(code, 0) + 1

    def summary(self) -> dict[str, Any]:
        return {"added": self.added, "errors": len(self.issues), "skippedCounts": dict(self.skipped),
                "issues": [{"name": i.name, "reason": i.reason} for i in self.issues[:1000]]}


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _probe_all(prober: Prober, images: list[ImportedImage], result: IngestResult, progress: Progress | None
               ) -> list[tuple[ImportedImage, ImageInfo, str | None]]:
    """Probe, thumbnail and store every image, on every core (``probe_pool``); corrupt ones are reported and
    skipped. The outcomes come back in the upload's order whichever path ran them."""
    stored: list[tuple[ImportedImage, ImageInfo, str | None]] = []
    outcomes = prober.probe([image.path for image in images])
    for done, (image, probed) in enumerate(zip(images, outcomes, strict=True), start=1):
        if probed.info is None:
            result.skip(f"{image.split}/{image.name}", probed.error or "unreadable image", "corrupt")
        else:
            stored.append((image, probed.info, probed.thumb))
        if progress and (done % 50 == 0 or done == len(images)):
            progress("images", done, len(images))
    return stored


def _merge_classes(dataset: Dataset, plan_task: str, plan_names: list[str], has_items: bool) -> dict[int, int]:
    """Map the upload's class ids onto the dataset's, appending classes it does not have yet."""
    if not has_items:
        dataset.task = plan_task
        if not dataset.class_names:
            dataset.class_names = list(plan_names)
            return {i: i for i in range(len(plan_names))}
    elif plan_task != dataset.task and plan_names:
        raise ImportRefused(f"this upload is a {plan_task} dataset but '{dataset.slug}' is {dataset.task}")
    names = list(dataset.class_names or [])
    mapping = {}
    for i, name in enumerate(plan_names):
        if name not in names:
            names.append(name)
        mapping[i] = names.index(name)
    dataset.class_names = names
    return mapping


def _insert_blob_rows(session: Session, rows: list[dict[str, Any]]) -> None:
    """One statement, compiled once and executed for many rows (a multi-row VALUES of 500 rows was compiled
    afresh for every chunk: 4,000 parameters each time)."""
    if not rows:
        return
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = dialect.insert(ImageBlob).on_conflict_do_nothing(index_elements=["sha256"])
    connection = session.connection()
    for start in range(0, len(rows), INSERT_CHUNK):
        connection.execute(statement, rows[start:start + INSERT_CHUNK])


@dataclass
class PreparedImport:
    """An upload unpacked, understood and stored as blobs, not yet in any dataset (``prepare_import``)."""

    plan: ImportPlan
    stored: list[tuple[ImportedImage, ImageInfo, str | None]]
    result: IngestResult
    started: float


@contextmanager
def prepare_import(*, blobs: BlobStore, settings: Settings, source: Path, progress: Progress | None = None
                   ) -> Iterator[PreparedImport]:
    """The slow part, with no database: unpack, understand the layout, probe and store every image. Raises
    ImportRefused for an upload that cannot be understood. The unpacked files live until the block ends (in a
    scratch folder that a crash cannot leak, ``lanner.scratch``)."""
    limits = ImportLimits.from_settings(settings)
    started = time.monotonic()
    result = IngestResult()
    unpacked = _is_archive(source)  # then the images are this import's own copies: the blob store may link them
    with scratch_folder(settings.resolved_home, "ingest-") as workdir, \
            Prober(blobs, settings.import_processes, link=unpacked,
                   archive_bytes=source.stat().st_size if unpacked else 0) as prober:
        root = extract_archive(source, workdir / "data", limits, unpacker=prober.unpacker()) if unpacked else source
        plan = plan_import(root, limits)
        if progress:  # unpacked and understood: the images found
            progress("unpacked", len(plan.images), len(plan.images))
        for issue in plan.issues:
            result.skip(issue.name, issue.reason, "invalid")
        probing = time.time()
        stored = _probe_all(prober, plan.images, result, progress)
        prober.close()  # the workers' memory is not needed any more
        if time.time() - probing >= settings.blob_grace_seconds / 2:  # else none can have sat idle long enough
            _keep_stored(blobs, stored, unpacked)  # just before the caller's short transaction references them
        yield PreparedImport(plan=plan, stored=stored, result=result, started=started)


def commit_import(session: Session, prepared: PreparedImport, *, dataset: Dataset, queued: bool,
                  progress: Progress | None = None) -> IngestResult:
    """One short transaction: the dataset's manifest becomes the current one plus the new items, swapped in.
    ``queued``: the dataset is ``processing`` (an API import) rather than imported directly (``lanner datasets
    import``); see ``datasets/state.py``. The caller commits."""
    plan, stored, result = prepared.plan, prepared.stored, prepared.result
    has_items = service.counts(session, dataset.manifest_id)["images"] > 0
    class_map = _merge_classes(dataset, plan.task, plan.class_names, has_items)
    if plan.kpt_shape and not dataset.kpt_shape:
        dataset.kpt_shape = plan.kpt_shape
    _insert_blob_rows(session, [
        {"sha256": info.sha256, "size": info.size, "width": info.width, "height": info.height,
         "format": info.format, "phash": _signed64(info.phash), "thumb_sha256": thumb,
         "created_at": utcnow()} for _, info, thumb in stored])
    # Always into a fresh copy, swapped in at the end: a clone or version sharing the old manifest
    # (even an empty one) never sees the new images, and a failure leaves the old one untouched.
    old_manifest = dataset.manifest_id
    manifest = service.copy_manifest(session, old_manifest)
    dataset.manifest_id = manifest
    result.added = _insert_items(session, manifest, stored, class_map, result)
    dataset.format = plan.format
    dataset.last_ingest = {**result.summary(), "processingTimeMs": (time.monotonic() - prepared.started) * 1000}
    service.touch(dataset)
    state.finish_import(session, dataset, queued=queued)
    service.drop_manifest_if_orphan(session, old_manifest)
    if progress:
        progress("health", 0, 1)
    refresh_health(session, dataset)
    if progress:
        progress("health", 1, 1)
    return result


def ingest_path(session: Session, *, blobs: BlobStore, settings: Settings, dataset_id: str, source: Path,
                queued: bool, progress: Progress | None = None) -> IngestResult:
    """Import ``source`` into the dataset: ``prepare_import`` then ``commit_import``. ``session`` is touched
    only for the final swap, so its transaction stays short."""
    with prepare_import(blobs=blobs, settings=settings, source=source, progress=progress) as prepared:
        dataset = session.get(Dataset, dataset_id)
        if dataset is None:
            raise ImportRefused("the dataset was deleted during the import")
        return commit_import(session, prepared, dataset=dataset, queued=queued, progress=progress)


def _keep_stored(blobs: BlobStore, stored: list[tuple[ImportedImage, ImageInfo, str | None]], link: bool) -> None:
    """Refresh every blob this import stored, just before the rows that reference them are written (outside
    any transaction: refreshing 100,000 files takes seconds).

    Until then nothing refers to them, so the collector (``maintenance.gc``) may take any that sat idle past its
    grace period (a very long import). Refreshing makes them fresh again, and one already taken is stored again
    from the unpacked file, so the commit never references missing bytes. Every blob was written or touched
    when its image was probed, so an import whose probing took under half the grace period skips this."""
    for image, info, thumb in stored:
        blobs.put_path(image.path, info.sha256, link=link)
        if thumb is not None and not blobs.touch(thumb):
            _, thumbnail = probe_image(image.path, thumbnail=True)
            blobs.put_bytes(thumbnail)


def _insert_items(session: Session, manifest: int, stored: list[tuple[ImportedImage, ImageInfo, str | None]],
                  class_map: dict[int, int], result: IngestResult) -> int:
    """Add the stored images to ``manifest`` with their labels mapped onto the dataset's classes; an image whose
    name is already taken in its split is skipped. Returns how many were added."""
    taken = {(split, name) for split, name in session.execute(
        select(DatasetItem.split, DatasetItem.name).where(DatasetItem.manifest_id == manifest))}
    rows = []
    for image, info, _ in stored:
        if (image.split, image.name) in taken:
            result.skip(f"{image.split}/{image.name}", "an image with this name already exists in this split",
                        "duplicate_name")
            continue
        taken.add((image.split, image.name))
        labels = None if image.labels is None else [
            {**label.to_json(), "classId": class_map.get(label.class_id, label.class_id)}
            for label in image.labels]
        class_id = class_map.get(image.class_id, image.class_id) if image.class_id is not None else None
        rows.append({"manifest_id": manifest, "key": service.new_key(), "name": image.name,
                     "split": image.split, "sha256": info.sha256, "labels": labels, "class_id": class_id,
                     "issues": ",", "updated_at": utcnow(), **service.label_fields(labels, class_id),
                     "labelled_by": "import" if labels is not None or class_id is not None else None})
    connection = session.connection()  # Core executemany: the ORM's bulk path adds nothing to plain rows
    for start in range(0, len(rows), INSERT_CHUNK):
        connection.execute(DatasetItem.__table__.insert(), rows[start:start + INSERT_CHUNK])
    return len(rows)
