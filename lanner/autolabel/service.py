"""``datasets.create_batch`` / ``batch`` / ``delete_batch``: auto-annotate a dataset's images with a model.

Asking (``request_run``): everything is checked before anything runs. The model must be one the caller may read,
of the dataset's task, with weights; the images are the unlabelled ones (or every one with ``includeAnnotated``);
the owner's available credit must cover ``images × LANNER_AUTOLABEL_PRICE_PER_IMAGE`` (402 otherwise). Then the
dataset's current content is saved as a version (so the run can be undone by restoring it) and the run is
queued; the work is the queue's (``autolabel.queue``, a worker through the executor like exports).

Recording (``record_chunk``): the worker hands the labels of each chunk of images to the server, which adds them
once per image (``AutolabelImage``), charges the images it recorded, and completes the run with the last one.
Existing labels are never changed: an unlabelled image gets the model's labels; with ``includeAnnotated`` an
image that has labels keeps them all and gains only the predictions that overlap none of its boxes of the same
class (IoU < ``KEEP_IOU``). Labels are recorded ``labelledBy model:<owner/project/model>``.

A preview (``preview: true``) runs the model on up to ``PREVIEW_IMAGES`` of those images in the request, through
the server's shared inference (the labelling assistant's path), and keeps what it proposed on the run; it
changes nothing, charges nothing, and the dataset page draws its boxes before the owner applies.

``operation: blur`` is the same run with faces found instead of labels and pixels replaced instead of labels
added: ``autolabel.blur`` (and ``autolabel.faces`` for the pixels); ``record_chunk`` hands it the chunk."""

from __future__ import annotations

from functools import partial
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.annotation import proposals
from lanner.autolabel import blur, jobs
from lanner.autolabel.models import AutolabelImage, AutolabelJob
from lanner.autolabel.schemas import BatchCreate
from lanner.billing import service as billing
from lanner.context import AppContext
from lanner.datasets import items as dataset_items
from lanner.datasets import service as datasets_service
from lanner.datasets import state
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import utcnow
from lanner.errors import Conflict, NotFound, PaymentRequired, Unprocessable
from lanner.inference import service as inference_service
from lanner.inference.images import decode_image
from lanner.inference.predictor import Predictor, Weights
from lanner.integrations import pixels as bucket_pixels
from lanner.projects.models import ModelRecord

PREVIEW_IMAGES = 6
WHAT = {"annotate": "Auto-annotation", "blur": "Face blurring"}
KEEP_IOU = 0.5
DEFAULT_IMGSZ = 640
UNLABELLED = (DatasetItem.labels.is_(None), DatasetItem.class_id.is_(None))


def _model(session: Session, principal: Principal, dataset: Dataset, model_id: str) -> tuple[ModelRecord, str]:
    record, ref = proposals.resolve_model(session, principal, model_id)
    if record.task and record.task != dataset.task:
        raise Unprocessable(f"a {record.task} model cannot label a {dataset.task} dataset")
    return record, ref


def _targets(record: ModelRecord, dataset: Dataset, mapping: list[int | None] | None) -> list[int | None]:
    """The dataset class of each model class: by name (case-insensitive) unless ``classMapping`` says; a dataset
    that names no classes yet takes the model's."""
    model_names = [str(n) for n in record.class_names or []]
    targets = inference_service.class_map(mapping, model_names=model_names,
                                          dataset_names=[str(n) for n in dataset.class_names or []])
    if targets is None:
        return list(range(len(model_names)))
    if not any(t is not None for t in targets):
        raise Unprocessable("none of the model's classes (" + ", ".join(model_names[:10]) + ") is a class of this "
                            "dataset: pass classMapping", code="no_matching_classes")
    return targets


def _keys(session: Session, dataset: Dataset, include_annotated: bool) -> list[str]:
    query = select(DatasetItem.key).where(DatasetItem.manifest_id == dataset.manifest_id)
    if not include_annotated:
        query = query.where(*UNLABELLED)
    return list(session.scalars(query.order_by(DatasetItem.name, DatasetItem.key)))


def active_run(session: Session, dataset: Dataset) -> AutolabelJob | None:
    return session.scalar(select(AutolabelJob).where(
        AutolabelJob.dataset_id == dataset.id, AutolabelJob.status.in_(jobs.ACTIVE))
        .order_by(AutolabelJob.created_at.desc()).limit(1))


def request_run(session: Session, principal: Principal, ctx: AppContext, dataset: Dataset, body: BatchCreate,
                *, predictor: Predictor) -> AutolabelJob:
    """A queued run (or, with ``preview``, a finished preview). The caller checked write access."""
    if body.operation == "blur":
        return _request_blur(session, principal, ctx, dataset, body)
    if not body.modelId:
        raise Unprocessable("modelId: the model to annotate with (ul://owner/project/model or a model id)")
    if dataset.task == "classify":
        raise Unprocessable("auto-annotation adds boxes, masks or keypoints: a classify dataset takes the labelling "
                            "assistant's proposals instead")
    _may_start(session, dataset, "auto-annotation")
    record, ref = _model(session, principal, dataset, body.modelId)
    if not record.class_names:
        raise Unprocessable(f"model '{ref}' names no classes (an uploaded checkpoint that no run here finished)",
                            code="no_classes")
    if not record.weights_sha256 or not ctx.blobs.exists(record.weights_sha256):
        raise Conflict(f"model '{ref}' has no weights on this server", code="no_weights")
    targets = _targets(record, dataset, body.classMapping)
    keys = _keys(session, dataset, body.includeAnnotated)
    if not keys:
        raise Conflict("every image of this dataset is labelled already: pass includeAnnotated to add the model's "
                       "labels to them too", code="nothing_to_annotate")
    imgsz = int((record.train_args or {}).get("imgsz") or DEFAULT_IMGSZ)
    job = AutolabelJob(dataset_id=dataset.id, owner_id=dataset.owner_id, requested_by=principal.user_id,
                       model_id=record.id, model_ref=ref, weights_sha256=record.weights_sha256,
                       confidence=body.confidence, iou=body.iou, include_annotated=body.includeAnnotated,
                       class_map=targets, imgsz=imgsz)
    if body.preview:
        return _preview(session, ctx, dataset, job, keys[:PREVIEW_IMAGES], predictor=predictor)
    price = _affordable(session, ctx, dataset, len(keys), "auto-annotating")
    if not dataset.class_names and record.class_names:  # a dataset without classes takes the model's
        dataset.class_names = [str(n) for n in record.class_names]
        datasets_service.touch(dataset)
    version, _ = datasets_service.create_version(session, dataset, f"Before auto-annotation with {ref}")
    job.keys, job.total, job.price_micros, job.version = keys, len(keys), price, version.version
    return jobs.create(session, job, reason=f"{len(keys)} images, version {version.version} saved")


def _may_start(session: Session, dataset: Dataset, feature: str) -> None:
    if dataset.status == state.PROCESSING:
        raise Conflict(f"the dataset is processing an import; start {feature} when the import has finished")
    bucket_pixels.require_processing(session, dataset, feature)  # the bucket integration's AI switch
    if active_run(session, dataset) is not None:
        raise Conflict("this dataset already has an image-processing run in progress: wait for it or cancel it",
                       code="batch_running")


def _affordable(session: Session, ctx: AppContext, dataset: Dataset, images: int, doing: str) -> int:
    """The price per image, when the owner's available credit covers ``images`` of them (402 otherwise)."""
    price = billing.dollars_to_micros(ctx.settings.autolabel_price_per_image)
    cost = price * images
    available = billing.balances(session, user_id=dataset.owner_id).available
    if cost > available:
        raise PaymentRequired(f"{doing} {images} images costs {billing.format_cents(cost)}; the "
                              f"workspace has {billing.format_cents(max(0, available))} available")
    return price


def _request_blur(session: Session, principal: Principal, ctx: AppContext, dataset: Dataset,
                  body: BatchCreate) -> AutolabelJob:
    """A queued face-blur run (``autolabel.blur``); with ``previewJobId``, the preview's images applied now."""
    _may_start(session, dataset, "face blurring")
    job = blur.new_job(dataset, principal, body)
    keys = blur.keys(session, dataset, body.imageId)
    if not keys:
        raise Conflict("this dataset has no images to blur", code="nothing_to_blur")
    if body.preview:
        return blur.preview(session, ctx, dataset, job, keys)
    blur.detector(ctx)  # 422 now rather than a failed run
    job.keys, job.total = keys, len(keys)
    reused = blur.reusable(session, ctx, dataset, job, body.previewJobId)
    job.price_micros = _affordable(session, ctx, dataset, len(keys), "blurring the faces of")
    version, _ = datasets_service.create_version(session, dataset, "Before blurring faces")
    job.version = version.version
    if len(reused) == len(keys):  # the preview did all of it: nothing for a worker
        job.status, job.completed_at = jobs.COMPLETED, utcnow()
    jobs.create(session, job, reason=f"{len(keys)} images ({len(reused)} from preview {body.previewJobId}), "
                f"version {version.version} saved")
    session.flush()
    if reused:
        blur.apply(session, dataset, job, reused)
        _charge(session, job)
    return job


def summary(job: AutolabelJob) -> str:
    if job.operation == "blur":
        return f"{job.processed} images, {job.faces} faces blurred"
    return f"{job.processed} images, {job.annotations} labels added"


def _preview(session: Session, ctx: AppContext, dataset: Dataset, job: AutolabelJob, keys: list[str], *,
             predictor: Predictor) -> AutolabelJob:
    """Run the model on ``keys`` now (on the calling thread: never on the event loop) and keep its labels."""
    digest = job.weights_sha256 or ""
    weights = Weights(digest, partial(ctx.blobs.copy_to, digest))
    rows = {key: digest for key, digest in session.execute(select(DatasetItem.key, DatasetItem.sha256).where(
        DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.key.in_(keys)))}
    limit = ctx.settings.inference_max_bytes
    pixels = inference_service.DatasetPixels(session, ctx.settings, ctx.blobs, dataset.owner_id)
    images = [decode_image(pixels.read(rows[k], max_bytes=limit), max_pixels=ctx.settings.inference_max_pixels,
                           field=f"image {k}") for k in keys]
    answers = predictor.annotate_now(weights, images, conf=job.confidence, iou=job.iou, imgsz=job.imgsz,
                                     class_map=job.class_map)
    job.preview, job.status, job.keys, job.total, job.processed = True, jobs.COMPLETED, keys, len(keys), len(keys)
    job.previews = [{"key": k, "labels": [{**label, "confidence": c} for label, c in zip(
        a["predictions"], a["confidences"], strict=True)]} for k, a in zip(keys, answers, strict=True)]
    job.annotations = sum(len(p["labels"]) for p in job.previews)
    job.weights_sha256 = None
    return jobs.create(session, job, reason=f"preview of {len(keys)} images")


# --- what the worker hands back ------------------------------------------------------------------

def worker_job(session: Session, job_id: str, slot: str) -> AutolabelJob:
    job = session.get(AutolabelJob, job_id)
    if job is None or not job.slot or job.slot != slot:
        raise NotFound("auto-annotation attempt not found")
    if job.status not in jobs.LAUNCHED:
        raise Conflict(f"this auto-annotation run is {job.status}: its labels are no longer taken")
    return job


def _iou(a: list[float], b: list[float]) -> float:
    """IoU of two normalised xywh boxes."""
    ax0, ay0, ax1, ay1 = a[0] - a[2] / 2, a[1] - a[3] / 2, a[0] + a[2] / 2, a[1] + a[3] / 2
    bx0, by0, bx1, by1 = b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2
    w, h = max(0.0, min(ax1, bx1) - max(ax0, bx0)), max(0.0, min(ay1, by1) - max(ay0, by0))
    union = a[2] * a[3] + b[2] * b[3] - w * h
    return w * h / union if union > 0 else 0.0


def _new_labels(existing: list[dict] | None, predicted: list[dict]) -> list[dict]:
    """The predictions an image gains: all when it has no labels; else those overlapping none of its boxes of
    the same class (existing labels stay exactly as they are)."""
    if not existing:
        return predicted
    return [p for p in predicted if "bbox" not in p or not any(
        e.get("classId") == p["classId"] and "bbox" in e and _iou(e["bbox"], p["bbox"]) >= KEEP_IOU
        for e in existing)]


def record_chunk(session: Session, ctx: AppContext, job: AutolabelJob, results: list[dict[str, Any]]
                 ) -> dict[str, Any]:
    """Add the labels (or blur the faces) of one chunk, each image once; charge the images recorded; complete
    the run with the last one. Returns what this call recorded."""
    billing.lock_user(session, job.owner_id)  # one chunk of a workspace at a time: the charge below is exact
    dataset = session.get(Dataset, job.dataset_id)
    if dataset is None:
        raise NotFound("dataset not found")
    wanted = set(job.keys)
    keys = [str(r["key"]) for r in results if str(r.get("key")) in wanted]
    done = set(session.scalars(select(AutolabelImage.key).where(AutolabelImage.job_id == job.id,
                                                                AutolabelImage.key.in_(keys))))
    fresh = [r for r in results if str(r.get("key")) in wanted and str(r["key"]) not in done]
    fresh = list({str(r["key"]): r for r in fresh}.values())
    before = (job.annotations, job.faces)
    recorded = 0
    if fresh:
        if job.operation == "blur":
            recorded = blur.record(session, ctx, dataset, job, fresh)
        else:
            recorded = _record_labels(session, dataset, job, fresh)
        _charge(session, job)
    if job.status in jobs.LAUNCHED and job.processed >= job.total:
        jobs.complete(session, job, summary(job))
    return {"recorded": recorded, "annotations": job.annotations - before[0], "faces": job.faces - before[1],
            "processed": job.processed, "total": job.total, "status": job.status}


def _record_labels(session: Session, dataset: Dataset, job: AutolabelJob, fresh: list[dict[str, Any]]) -> int:
    recorded = added_total = 0
    classes = set(job.classes or [])
    manifest = datasets_service.writable_manifest(session, dataset)
    items = {item.key: item for item in session.scalars(select(DatasetItem).where(
        DatasetItem.manifest_id == manifest, DatasetItem.key.in_([str(r["key"]) for r in fresh])))}
    for result in fresh:
        key = str(result["key"])
        item = items.get(key)
        if item is None:  # deleted since the run was asked for: nothing to process, nothing to charge
            session.add(AutolabelImage(job_id=job.id, key=key, added=0))
            job.total -= 1
            continue
        added: list[dict] = []
        if job.include_annotated or (item.labels is None and item.class_id is None):
            predicted = dataset_items.validate_labels(dataset, result.get("labels") or [])
            added = _new_labels(item.labels, predicted)
            if added or item.labels is None:
                dataset_items.set_labels(dataset, item, [*(item.labels or []), *added],
                                         by=f"model:{job.model_ref}", class_id=item.class_id)
        session.add(AutolabelImage(job_id=job.id, key=key, added=len(added)))
        recorded += 1
        added_total += len(added)
        classes.update(label["classId"] for label in added)
        job.partial_images += 1 if result.get("partial") else 0
    job.processed += recorded
    job.annotations += added_total
    job.classes = sorted(classes)
    session.flush()
    return recorded


def _charge(session: Session, job: AutolabelJob) -> None:
    """Bring the ledger to ``processed × price``; a workspace out of credit stops the run (what it recorded
    stays, charged as far as the credit went)."""
    target = job.processed * job.price_micros
    charged, shortfall = billing.charge_usage_to(
        session, user_id=job.owner_id, reference=f"autolabel:{job.id}", charged_micros=job.charged_micros,
        target_micros=target, kind="autolabel", description=f"{WHAT[job.operation]} of {job.processed} images")
    job.charged_micros += charged
    if shortfall > 0:
        jobs.fail(session, job, "the workspace ran out of credit; the images labelled so far keep their labels")


def remaining_keys(session: Session, job: AutolabelJob) -> list[str]:
    """The images of the run not recorded yet: what the next attempt labels."""
    done = set(session.scalars(select(AutolabelImage.key).where(AutolabelImage.job_id == job.id)))
    return [k for k in job.keys if k not in done]
