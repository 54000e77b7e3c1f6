"""Dataset archives (model exports are ``lanner.exports``): Ultralytics NDJSON (what ``ul://owner/datasets/slug``
resolves to), a YOLO zip and COCO JSON.

A built export is a blob; it is reused while the dataset's revision is unchanged (and its embedded image links
are far from expiry), so repeated ``yolo train data=ul://...`` calls do not rebuild anything.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.config import Settings
from lanner.datasets import state, versions
from lanner.datasets.models import Dataset, DatasetExport, DatasetItem, DatasetVersion, ImageBlob
from lanner.db import utcnow
from lanner.errors import BadRequest, Conflict
from lanner.scratch import scratch_folder
from lanner.storage.blobs import BlobStore
from lanner.storage.signing import URLSigner

KINDS = {"ndjson": "dataset.ndjson", "yolo": "dataset.zip", "coco": "annotations.json"}
IMAGE_URL_TTL = timedelta(days=7)
ANNOTATION_KEY = {"detect": "boxes", "segment": "segments", "pose": "pose", "obb": "obb"}


class ImageUrl(Protocol):
    """Where an image's pixels are when they are not in the blob store (a bucket image:
    ``integrations.pixels.ExportPixels``), for an export being built: called with (sha256, seconds), a URL to
    them; ``chunks``, their bytes (a YOLO zip holds the images themselves). Either answers None for a blob, and
    refuses (409) pixels that are no longer those imported. Passed in by the routers, so datasets imports no
    domain above."""

    def __call__(self, sha256: str, ttl: int, /) -> str | None: ...

    def chunks(self, sha256: str, /) -> Iterator[bytes] | None: ...


def _rows(session: Session, manifest_id: int) -> Iterator[Any]:
    query = (select(DatasetItem.name, DatasetItem.split, DatasetItem.sha256, DatasetItem.labels,
                    DatasetItem.class_id, ImageBlob.width, ImageBlob.height)
             .join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
             .where(DatasetItem.manifest_id == manifest_id).order_by(DatasetItem.split, DatasetItem.name))
    yield from session.execute(query.execution_options(yield_per=2000))


def yolo_row(task: str, label: dict) -> list[float] | None:
    """One label as the YOLO text row: class first, then the task's coordinates."""
    cid = int(label["classId"])
    if task == "segment" and label.get("segments"):
        return [cid, *label["segments"]]
    if task == "obb" and label.get("obb"):
        return [cid, *label["obb"]]
    if task == "pose" and label.get("bbox") and label.get("keypoints") is not None:
        return [cid, *label["bbox"], *label["keypoints"]]
    if label.get("bbox"):
        return [cid, *label["bbox"]]
    return None


def _round(values: list) -> list:
    return [v if isinstance(v, int) else round(float(v), 6) for v in values]


def write_ndjson(session: Session, dataset: Dataset, manifest_id: int, class_names: list[str], task: str, out: Path,
                 *, signer: URLSigner, owner: str, image_url: ImageUrl | None = None) -> None:
    ttl = int(IMAGE_URL_TTL.total_seconds())
    header: dict[str, Any] = {
        "type": "dataset", "task": task, "name": dataset.slug, "description": dataset.description or "",
        "url": f"{signer.public_url}/{owner}/datasets/{dataset.slug}",
        "class_names": {str(i): name for i, name in enumerate(class_names)},
    }
    if task == "pose" and dataset.kpt_shape:
        header["kpt_shape"] = list(dataset.kpt_shape)
    with out.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(header) + "\n")
        for row in _rows(session, manifest_id):
            if task == "classify":
                if row.class_id is None:
                    continue
                annotations: dict[str, Any] = {"classification": [row.class_id]}
            else:
                if row.labels is None:
                    continue  # unlabelled, not a background image: training must not learn "nothing here"
                rows = [_round(r) for r in (yolo_row(task, x) for x in row.labels) if r is not None]
                annotations = {ANNOTATION_KEY.get(task, "boxes"): rows} if rows else {}
            url = image_url(row.sha256, ttl) if image_url else None
            url = url or signer.download_url(row.sha256, row.name, ttl_seconds=ttl)
            fh.write(json.dumps({"type": "image", "file": row.name, "url": url, "width": row.width,
                                 "height": row.height, "split": row.split, "annotations": annotations}) + "\n")


def write_yolo_zip(session: Session, dataset: Dataset, manifest_id: int, class_names: list[str], task: str,
                   out: Path, *, blobs: BlobStore, image_url: ImageUrl | None = None) -> None:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        splits: set[str] = set()
        for row in _rows(session, manifest_id):
            splits.add(row.split)
            if task == "classify":
                if row.class_id is None:
                    continue
                name = f"{row.split}/{class_names[row.class_id]}/{row.name}"
            else:
                name = f"images/{row.split}/{row.name}"
                stem = row.name.rsplit(".", 1)[0]
                if row.labels is not None:
                    lines = [" ".join(str(v) for v in _round(r)) for r in (yolo_row(task, x) for x in row.labels)
                             if r is not None]
                    archive.writestr(f"labels/{row.split}/{stem}.txt", "\n".join(lines) + ("\n" if lines else ""),
                                     zipfile.ZIP_DEFLATED)
            elsewhere = image_url.chunks(row.sha256) if image_url else None
            with archive.open(name, "w") as target:
                if elsewhere is not None:
                    for chunk in elsewhere:
                        target.write(chunk)
                else:
                    with blobs.open(row.sha256) as source:
                        shutil.copyfileobj(source, target, 1 << 20)
        if task != "classify":
            lines = [f"{s}: images/{s}" for s in ("train", "val", "test") if s in splits]
            names = "\n".join(f"  {i}: {json.dumps(n)}" for i, n in enumerate(class_names))
            extra = f"kpt_shape: {list(dataset.kpt_shape)}\n" if task == "pose" and dataset.kpt_shape else ""
            archive.writestr("data.yaml", "path: .\n" + "\n".join(lines) + f"\n{extra}names:\n{names}\n")


def write_coco(session: Session, dataset: Dataset, manifest_id: int, class_names: list[str], out: Path) -> None:
    images, annotations = [], []
    for image_id, row in enumerate(_rows(session, manifest_id), start=1):
        images.append({"id": image_id, "file_name": row.name, "width": row.width, "height": row.height,
                       "split": row.split})
        for label in row.labels or []:
            box = label.get("bbox")
            if not box:
                continue
            cx, cy, w, h = box
            entry: dict[str, Any] = {
                "id": len(annotations) + 1, "image_id": image_id, "category_id": int(label["classId"]) + 1,
                "bbox": [round((cx - w / 2) * row.width, 2), round((cy - h / 2) * row.height, 2),
                         round(w * row.width, 2), round(h * row.height, 2)],
                "area": round(w * row.width * h * row.height, 2), "iscrowd": 0,
            }
            if label.get("segments"):
                xy = label["segments"]
                entry["segmentation"] = [[round(v * (row.width if i % 2 == 0 else row.height), 2)
                                          for i, v in enumerate(xy)]]
            annotations.append(entry)
    categories = [{"id": i + 1, "name": name} for i, name in enumerate(class_names)]
    out.write_text(json.dumps({"info": {"description": dataset.name}, "images": images,
                               "annotations": annotations, "categories": categories}))


def build_export(session: Session, dataset: Dataset, *, blobs: BlobStore, signer: URLSigner, settings: Settings,
                 kind: str = "ndjson", manifest_id: int | None = None, class_names: list[str] | None = None,
                 task: str | None = None, revision: int | None = None, owner: str = "",
                 image_url: ImageUrl | None = None) -> tuple[str, str, bool]:
    """Return (sha256, filename, cached) of the export, building it only when the content changed."""
    if kind not in KINDS:
        raise BadRequest(f"format must be one of {', '.join(KINDS)}")
    manifest_id = manifest_id if manifest_id is not None else dataset.manifest_id
    revision = dataset.revision if revision is None else revision
    now = utcnow()
    cached = session.scalar(select(DatasetExport).where(
        DatasetExport.dataset_id == dataset.id, DatasetExport.kind == kind, DatasetExport.revision == revision))
    # With bucket images (``image_url``) never from the cache: each build compares the objects with the bucket.
    if cached is not None and image_url is None and blobs.exists(cached.sha256) \
            and (cached.expires_at is None or cached.expires_at > now + IMAGE_URL_TTL / 2):
        return cached.sha256, KINDS[kind], True
    with scratch_folder(settings.resolved_home, f"export-{kind}-") as folder:
        path = folder / f"export.{kind}"
        names = list(class_names if class_names is not None else dataset.class_names or [])
        task = task or dataset.task
        if kind == "ndjson":
            write_ndjson(session, dataset, manifest_id, names, task, path, signer=signer, owner=owner,
                         image_url=image_url)
        elif kind == "yolo":
            write_yolo_zip(session, dataset, manifest_id, names, task, path, blobs=blobs, image_url=image_url)
        else:
            write_coco(session, dataset, manifest_id, names, path)
        with path.open("rb") as fh:
            blob = blobs.put_file(fh)
    expires = now + IMAGE_URL_TTL if kind == "ndjson" else None
    if cached is not None:
        cached.sha256, cached.size, cached.created_at, cached.expires_at = blob.sha256, blob.size, now, expires
    else:
        session.add(DatasetExport(dataset_id=dataset.id, kind=kind, revision=revision, sha256=blob.sha256,
                                  size=blob.size, created_at=now, expires_at=expires))
    session.flush()
    return blob.sha256, KINDS[kind], False


def export_version(session: Session, dataset: Dataset, version: DatasetVersion, *, blobs: BlobStore,
                   signer: URLSigner, settings: Settings, kind: str = "ndjson", owner: str = "",
                   filename: str | None = None, image_url: ImageUrl | None = None) -> str:
    """A signed link to an export of ``version`` (frozen content, so it is cached for good), downloading as
    ``filename`` if given."""
    sha, name, _ = build_export(session, dataset, blobs=blobs, signer=signer, settings=settings, kind=kind,
                                manifest_id=version.manifest_id, class_names=list(version.class_names),
                                task=version.task, revision=-version.version, owner=owner, image_url=image_url)
    return signer.download_url(sha, filename or name)


SUFFIXES = {"ndjson": ".ndjson", "yolo": ".zip", "coco": "-coco.json"}


def download_name(dataset: Dataset, kind: str, version: int | None) -> str:
    """What a browser saves a download as: ``shapes-v2.zip``, or ``shapes-2026-12-06.zip`` for the current
    content (the API keeps the trainer's names, ``KINDS``)."""
    return f"{dataset.slug}-{f'v{version}' if version else utcnow().date().isoformat()}{SUFFIXES[kind]}"


def export(session: Session, dataset: Dataset, *, version: int | None, pinned_version_id: int | None, kind: str,
           owner: str, blobs: BlobStore, signer: URLSigner, settings: Settings, named: bool = False,
           image_url: ImageUrl | None = None) -> dict[str, Any]:
    """``datasets.export``: a version when one is asked for, or the one the caller's training run pinned
    (``versions.pinned_version``); otherwise the live dataset, which must not be halfway through an import.
    ``named``: the link downloads as ``download_name`` (the web pages' links)."""
    captured = versions.pinned_version(session, dataset, pinned_version_id) if version is None else None
    if dataset.status == state.PROCESSING and captured is None:
        raise Conflict("the dataset is still processing an import; try again when it is ready")
    if version is not None or captured is not None:
        frozen = captured or versions.get_version(session, dataset, version or 0)
        url = export_version(session, dataset, frozen, blobs=blobs, signer=signer, settings=settings, kind=kind,
                             owner=owner, filename=download_name(dataset, kind, frozen.version) if named else None,
                             image_url=image_url)
        return {"downloadUrl": url, "version": frozen.version}
    sha, name, cached = build_export(session, dataset, blobs=blobs, signer=signer, settings=settings, kind=kind,
                                     owner=owner, image_url=image_url)
    name = download_name(dataset, kind, None) if named else name
    return {"downloadUrl": signer.download_url(sha, name), "cached": cached}
