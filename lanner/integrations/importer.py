"""A bucket import: list the prefix, read each image and label file once, and index the images in place.

Reuses the upload pipeline where it fits: the files are fetched into a scratch folder with the bucket's layout,
``plan_import`` understands it (YOLO folders, ``data.yaml`` class names, splits) exactly as it understands an
unpacked archive, each image is probed (sha256, size, phash) and thumbnailed, and ``commit_import`` swaps the
new manifest in, all or nothing. The difference: only the thumbnail goes into Lanner's blob store; the pixels
stay in the bucket, and a ``BucketObject`` row pins each image to the ETag it was read at (the read itself is
conditional on that ETag, so an object changed between the listing and the read is skipped, not mixed up).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any

import obstore
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from lanner.config import Settings
from lanner.datasets.images import probe_image
from lanner.datasets.imports.formats.detect import plan_import
from lanner.datasets.imports.ingest import IngestResult, PreparedImport, commit_import
from lanner.datasets.models import Dataset
from lanner.datasets.records import CorruptImage, ImageInfo, ImportedImage, ImportLimits, ImportRefused
from lanner.db import Database, utcnow
from lanner.errors import LannerError
from lanner.integrations import jobs, service, stores
from lanner.integrations.models import BucketImport, BucketObject, StorageIntegration
from lanner.scratch import scratch_folder
from lanner.storage.blobs import BlobStore

log = logging.getLogger(__name__)
WANTED = service.IMAGE_SUFFIXES | {".txt", ".yaml", ".yml"}
FETCHERS = 8  # reads in flight: network-bound, so more than the cores
PROGRESS_EVERY = 100


class TooManyObjects(LannerError):
    code = "too_many_objects"


def _listing(store: Any, base: str, settings: Settings) -> dict[str, dict[str, Any]]:
    """Relative path -> object metadata, for the files an import can use; refuses a prefix over the cap."""
    found: dict[str, dict[str, Any]] = {}
    for batch in obstore.list(store, base or None, chunk_size=1000):
        for meta in batch:
            rel = meta["path"][len(base):]
            if PurePosixPath(rel).suffix.lower() not in WANTED or meta["size"] > settings.bucket_max_object_bytes:
                continue
            found[rel] = {**meta, "e_tag": stores.etag(meta.get("e_tag"))}  # the pin's one form (``stores.etag``)
            if len(found) > settings.bucket_max_objects:
                raise TooManyObjects(f"more than {settings.bucket_max_objects} files under '{base or '/'}': "
                                     "import a narrower prefix (LANNER_BUCKET_MAX_OBJECTS)")
    return found


def _fetch(store: Any, key: str, etag: str | None, path: Path) -> None:
    """The object's bytes as listed: the read is conditional on the listed ETag."""
    result = obstore.get(store, key, options={"if_match": etag} if etag else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        for chunk in result:
            out.write(chunk)


def _probe(blobs: BlobStore, image: ImportedImage) -> tuple[ImageInfo, str] | str:
    try:
        info, thumbnail = probe_image(image.path, thumbnail=True)
    except CorruptImage as exc:
        return str(exc)
    return info, blobs.put_bytes(thumbnail).sha256


class Import:
    """One attempt at one job (``run``)."""

    def __init__(self, db: Database, blobs: BlobStore, settings: Settings, job_id: str) -> None:
        self.db, self.blobs, self.settings, self.job_id = db, blobs, settings, job_id

    def progress(self, stage: str, done: int, total: int) -> None:
        with self.db.session() as session:
            job = session.get(BucketImport, self.job_id)
            if job is not None:
                jobs.progress(session, job, stage, done, total)

    def run(self) -> None:
        with self.db.session() as session:
            job = session.get(BucketImport, self.job_id)
            if job is None or not jobs.claim(session, job):
                return
            integration = session.get(StorageIntegration, job.integration_id) if job.integration_id else None
            if integration is None:
                jobs.fail(session, job, "the storage integration was disconnected")
                return
            session.expunge(integration)
            target, base = job.target, job.prefix.rstrip("/") + "/" if job.prefix else ""
        try:
            result = self._import(integration, target, base)
        except (LannerError, OSError) as exc:
            message = exc.message if isinstance(exc, LannerError) else f"reading failed ({type(exc).__name__})"
            if "the endpoint resolves to" in str(exc):
                message = "the bucket's endpoint resolves to an address the operator has not allowed"
            with self.db.session() as session:
                jobs.fail(session, session.get(BucketImport, self.job_id), message)
            return
        except Exception as exc:  # noqa: BLE001 -- a client error from the user's bucket: reworded, never echoed
            log.warning("bucket import %s failed: %s", self.job_id, type(exc).__name__)
            with self.db.session() as session:
                jobs.fail(session, session.get(BucketImport, self.job_id), service.reworded(exc).message)
            return
        log.info("bucket import %s: %s images", self.job_id, result["added"])

    def _import(self, integration: StorageIntegration, target: str, base: str) -> dict[str, Any]:
        started = time.monotonic()
        store = service.open_store(self.settings, integration, target)
        listing = _listing(store, base, self.settings)
        self.progress("listed", len(listing), len(listing))
        with scratch_folder(self.settings.resolved_home, "bucket-") as work:
            root = work / "data"
            with ThreadPoolExecutor(FETCHERS) as pool:
                futures = [pool.submit(_fetch, store, base + rel, meta.get("e_tag"), root / rel)
                           for rel, meta in listing.items()]
                for done, future in enumerate(futures, start=1):
                    future.result()
                    if done % PROGRESS_EVERY == 0 or done == len(futures):
                        self.progress("download", done, len(futures))
            plan = plan_import(root, ImportLimits.from_settings(self.settings))
            result = IngestResult()
            for issue in plan.issues:
                result.skip(issue.name, issue.reason, "invalid")
            stored, sources = [], []
            with ThreadPoolExecutor(max(1, self.settings.import_processes or 2)) as pool:
                outcomes = pool.map(lambda image: _probe(self.blobs, image), plan.images)
                for done, (image, outcome) in enumerate(zip(plan.images, outcomes, strict=True), start=1):
                    if isinstance(outcome, str):
                        result.skip(f"{image.split}/{image.name}", outcome, "corrupt")
                    else:
                        info, thumb = outcome
                        stored.append((image, info, thumb))
                        rel = image.path.relative_to(root).as_posix()
                        sources.append((base + rel, listing[rel], info.sha256))
                    if done % PROGRESS_EVERY == 0 or done == len(plan.images):
                        self.progress("images", done, len(plan.images))
            prepared = PreparedImport(plan=plan, stored=stored, result=result, started=started)
            with self.db.session() as session:
                job = session.get(BucketImport, self.job_id)
                dataset = session.get(Dataset, job.dataset_id)
                if dataset is None:
                    raise ImportRefused("the dataset was deleted during the import")
                commit_import(session, prepared, dataset=dataset, queued=False)  # see jobs: never processing
                _pin(session, dataset.owner_id, integration.id, target, sources)
                summary = result.summary()
                jobs.succeed(session, job, {k: summary[k] for k in ("added", "errors", "skippedCounts")})
                return summary


def _pin(session: Session, owner_id: str, integration_id: str, target: str,
         sources: list[tuple[str, dict[str, Any], str]]) -> None:
    """``owner_id``: the dataset's workspace (a team's, for a team dataset), where a reader of the dataset looks
    its images' pixels up, whoever connected the bucket."""
    rows = [{"owner_id": owner_id, "integration_id": integration_id, "target": target, "key": key,
             "etag": meta.get("e_tag") or "", "size": meta["size"], "sha256": sha, "state": "ok",
             "checked_at": utcnow()} for key, meta, sha in sources]
    if not rows:
        return
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = dialect.insert(BucketObject).on_conflict_do_nothing(
        index_elements=["owner_id", "integration_id", "target", "key", "etag"])
    session.connection().execute(statement, rows)
