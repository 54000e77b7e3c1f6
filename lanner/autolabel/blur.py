"""``datasets.create_batch {operation: "blur"}``: blur the faces in a dataset's images (or one, ``imageId``).

It runs as auto-annotation does (the same run, queue, worker, chunks, billing, cancel and crash-resume; see
``autolabel.service``); what differs is what an image's result is. The worker finds the faces
(``autolabel.faces``, a cascade that ships with OpenCV or one the operator installs, never a download) and
hands back their boxes; the server blurs the original's pixels inside the boxes (scaled ``boxScale`` times) and
stores the result as the image's new revision: new bytes, new digest, the same key, name and labels, in the
dataset's writable manifest. Before the run the dataset is saved as a version, so the original pixels are
never lost (restoring that version brings them back). An image without faces keeps its bytes; each image the
run looks at is billed once.

A preview (``preview: true``) blurs up to six images in the request and stores them (with their thumbnails)
without touching the dataset. Applying with ``previewJobId`` and the same settings uses those exact images:
for each previewed image whose bytes have not changed since, the stored blurred revision is applied at once
(billed then, never again), and only the other images go to the worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.autolabel import faces, jobs
from lanner.autolabel.models import AutolabelImage, AutolabelJob
from lanner.autolabel.schemas import BatchCreate
from lanner.context import AppContext
from lanner.datasets import items as dataset_items
from lanner.datasets import service as datasets_service
from lanner.datasets.images import probe_image
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.db import utcnow
from lanner.errors import Unprocessable
from lanner.inference import service as inference_service
from lanner.scratch import scratch_folder

PREVIEW_IMAGES = 6
NO_DETECTOR = ("face blurring needs a face detector: set LANNER_FACE_CASCADE to a Haar cascade XML, or install "
               "an OpenCV 4 wheel (it ships its cascades; OpenCV 5 does not), and Lanner downloads none")


def detector(ctx: AppContext) -> Any:
    """The server's cascade (for a preview), or 422 before anything runs when there is none."""
    path = faces.cascade_path(ctx.settings.face_cascade)
    if path is None:
        raise Unprocessable(NO_DETECTOR, code="no_face_detector")
    return faces.load(path)


def keys(session: Session, dataset: Dataset, image_id: str | None) -> list[str]:
    """Every image of the dataset by name, or the one ``imageId`` names (404 when it is not this dataset's)."""
    query = select(DatasetItem.key).where(DatasetItem.manifest_id == dataset.manifest_id)
    if image_id:
        dataset_id, key = dataset_items.split_image_id(image_id)
        query = query.where(DatasetItem.key == (key if dataset_id == dataset.id else ""))
    found = list(session.scalars(query.order_by(DatasetItem.name, DatasetItem.key)))
    if image_id and not found:
        raise Unprocessable(f"imageId: image '{image_id[:100]}' is not an image of this dataset")
    return found


def new_job(dataset: Dataset, principal: Principal, body: BatchCreate) -> AutolabelJob:
    return AutolabelJob(dataset_id=dataset.id, owner_id=dataset.owner_id, requested_by=principal.user_id,
                        operation="blur", confidence=body.confidence, box_scale=body.boxScale)


def _digests(session: Session, dataset: Dataset, wanted: list[str]) -> dict[str, tuple[str, str]]:
    """key -> (sha256, format) of the images ``wanted`` in the dataset's current manifest."""
    return {row.key: (row.sha256, row.format) for row in session.execute(
        select(DatasetItem.key, DatasetItem.sha256, ImageBlob.format)
        .join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
        .where(DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.key.in_(wanted)))}


def _store(session: Session, ctx: AppContext, data: bytes) -> str:
    """Keep blurred bytes as an image (blob, thumbnail, ``ImageBlob`` row: links to it are served); its digest."""
    with scratch_folder(ctx.settings.resolved_home, "blur-") as folder:
        path = Path(folder) / "image"
        path.write_bytes(data)
        info, thumbnail = probe_image(path, thumbnail=True)
        ctx.blobs.put_path(path, info.sha256, move=True)
    datasets_service.insert_image_blob(session, info, ctx.blobs.put_bytes(thumbnail).sha256)
    return info.sha256


def _blurred(session: Session, ctx: AppContext, pixels: Any, source: tuple[str, str], boxes: list[list[float]],
             box_scale: float) -> str:
    data = pixels.read(source[0], max_bytes=ctx.settings.inference_max_bytes)
    return _store(session, ctx, faces.encode(faces.blur(faces.decode(data), boxes, box_scale), source[1]))


def preview(session: Session, ctx: AppContext, dataset: Dataset, job: AutolabelJob, wanted: list[str]) -> AutolabelJob:
    """Blur up to ``PREVIEW_IMAGES`` images now (on the calling thread) and keep the results on the run, not in
    the dataset: ``previews`` [{key, source, sha256, faces}] (``sha256`` None: no face, nothing to change)."""
    cascade = detector(ctx)
    wanted = wanted[:PREVIEW_IMAGES]
    rows = _digests(session, dataset, wanted)
    pixels = inference_service.DatasetPixels(session, ctx.settings, ctx.blobs, dataset.owner_id)
    previews = []
    for key in (k for k in wanted if k in rows):
        data = pixels.read(rows[key][0], max_bytes=ctx.settings.inference_max_bytes)
        found = faces.detect(cascade, faces.decode(data), job.confidence)
        digest = _blurred(session, ctx, pixels, rows[key], found, job.box_scale) if found else None
        previews.append({"key": key, "source": rows[key][0], "sha256": digest, "faces": len(found)})
    job.preview, job.status, job.keys = True, jobs.COMPLETED, [p["key"] for p in previews]
    job.total = job.processed = len(previews)
    job.previews, job.faces = previews, sum(p["faces"] for p in previews)
    return jobs.create(session, job, reason=f"preview of {len(previews)} images")


def reusable(session: Session, ctx: AppContext, dataset: Dataset, job: AutolabelJob,
             preview_job_id: str | None) -> list[dict[str, Any]]:
    """The previewed images ``previewJobId`` lets this run apply as they are: those of a blur preview of this
    dataset with the same settings whose source bytes are still the image's, and whose result is still stored."""
    if not preview_job_id:
        return []
    previewed = session.get(AutolabelJob, preview_job_id)
    if previewed is None or previewed.dataset_id != dataset.id or not previewed.preview \
            or previewed.operation != "blur":
        raise Unprocessable(f"previewJobId: '{preview_job_id[:64]}' is not a blur preview of this dataset")
    if (previewed.confidence, previewed.box_scale) != (job.confidence, job.box_scale):
        raise Unprocessable("previewJobId: apply a preview with the settings it was made with (confidence "
                            f"{previewed.confidence}, boxScale {previewed.box_scale})")
    if previewed.dismissed:  # its images were let go of (``forget_preview``): the run blurs them afresh
        return []
    current = _digests(session, dataset, [p["key"] for p in previewed.previews or []])
    kept = set(session.scalars(select(ImageBlob.sha256).where(
        ImageBlob.sha256.in_([p["sha256"] for p in previewed.previews or [] if p["sha256"]]))))
    return [p for p in previewed.previews or [] if p["key"] in job.keys and p["key"] in current
            and current[p["key"]][0] == p["source"]
            and (p["sha256"] is None or (p["sha256"] in kept and ctx.blobs.exists(p["sha256"])))]


def _replace(session: Session, dataset: Dataset, item: DatasetItem, digest: str) -> None:
    """The image's new revision: other bytes under the same key, name, split and labels."""
    item.sha256 = digest
    item.updated_at = utcnow()
    datasets_service.touch(dataset)


def apply(session: Session, dataset: Dataset, job: AutolabelJob, previews: list[dict[str, Any]]) -> int:
    """Apply a preview's stored results to the images they were made from (``reusable`` checked them): the
    images recorded now, billed by the caller like any chunk's."""
    manifest = datasets_service.writable_manifest(session, dataset)
    items = {item.key: item for item in session.scalars(select(DatasetItem).where(
        DatasetItem.manifest_id == manifest, DatasetItem.key.in_([p["key"] for p in previews])))}
    for entry in previews:
        if entry["sha256"]:
            _replace(session, dataset, items[entry["key"]], entry["sha256"])
        session.add(AutolabelImage(job_id=job.id, key=entry["key"], added=entry["faces"]))
    job.processed += len(previews)
    job.faces += sum(p["faces"] for p in previews)
    session.flush()
    return len(previews)


def record(session: Session, ctx: AppContext, dataset: Dataset, job: AutolabelJob,
           fresh: list[dict[str, Any]]) -> int:
    """Blur the faces the worker found in ``fresh`` (images not recorded yet); returns the images recorded."""
    manifest = datasets_service.writable_manifest(session, dataset)
    items = {item.key: item for item in session.scalars(select(DatasetItem).where(
        DatasetItem.manifest_id == manifest, DatasetItem.key.in_([str(r["key"]) for r in fresh])))}
    formats = {digest: fmt for digest, fmt in session.execute(select(ImageBlob.sha256, ImageBlob.format).where(
        ImageBlob.sha256.in_([item.sha256 for item in items.values()])))}
    pixels = inference_service.DatasetPixels(session, ctx.settings, ctx.blobs, dataset.owner_id)
    recorded = 0
    for result in fresh:
        key, boxes = str(result["key"]), result.get("faces") or []
        item = items.get(key)
        if item is None:  # deleted since the run was asked for: nothing to blur, nothing to charge
            session.add(AutolabelImage(job_id=job.id, key=key, added=0))
            job.total -= 1
            continue
        if boxes:
            _replace(session, dataset, item, _blurred(session, ctx, pixels, (item.sha256, formats[item.sha256]),
                                                      boxes, job.box_scale))
        session.add(AutolabelImage(job_id=job.id, key=key, added=len(boxes)))
        job.faces += len(boxes)
        recorded += 1
    job.processed += recorded
    session.flush()
    return recorded


def preview_images(session: Session, dataset: Dataset, job: AutolabelJob, link: Any) -> list[dict[str, str]]:
    """The SDK's ``previews``: a preview's images as they would be after the run, or the first six a run has
    blurred so far, each with its thumbnail (signed links, made afresh on each call)."""
    if job.preview:
        shown = [(p["key"], p["sha256"] or p["source"]) for p in job.previews or []]
    else:
        done = list(session.scalars(select(AutolabelImage.key).where(
            AutolabelImage.job_id == job.id, AutolabelImage.added > 0).order_by(AutolabelImage.key)
            .limit(PREVIEW_IMAGES)))
        current = dict(_digests(session, dataset, done))
        shown = [(key, current[key][0]) for key in done if key in current]
    thumbs = {digest: thumb for digest, thumb in session.execute(
        select(ImageBlob.sha256, ImageBlob.thumb_sha256).where(ImageBlob.sha256.in_([d for _, d in shown])))}
    out = []
    for key, digest in shown:
        if digest not in thumbs:  # a dismissed preview's images are gone
            continue
        view = {"imageId": f"{dataset.id}-{key}", "imageUrl": link(digest, "image")}
        if thumbs[digest]:
            view["thumbnailUrl"] = link(thumbs[digest], "thumbnail.jpg")
        out.append(view)
    return out


def forget_preview(session: Session, job_id: str | None) -> set[str]:
    """A dismissed blur preview lets go of the images it prepared (those no dataset took): their rows go now,
    and the blobs they held are returned for the caller to collect. It can no longer be applied as it was."""
    job = session.get(AutolabelJob, job_id) if job_id else None
    if job is None or not job.preview or job.operation != "blur":
        return set()
    return datasets_service.forget_unused_images(session, {p["sha256"] for p in job.previews or [] if p["sha256"]})
