"""The SDK's views of auto-annotation and face-blur runs (``datasets.batch``, ``delete_batch``) and the labels a
preview proposed (the dataset page draws them); the runs themselves are ``autolabel.service``'s."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.autolabel import blur, jobs
from lanner.autolabel.models import AutolabelJob
from lanner.autolabel.service import active_run
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.db import iso
from lanner.errors import NotFound


def _common(job: AutolabelJob) -> dict[str, Any]:
    view: dict[str, Any] = {"id": job.id, "confidence": float(job.confidence), "boxScale": float(job.box_scale)}
    if job.operation == "blur":
        view["operation"] = "blur"
    if job.preview:
        view["preview"] = True
    return view


def batch_view(session: Session, dataset: Dataset, link: Any) -> dict[str, Any]:
    """``datasets.batch``: the run in flight, and the last finished one not dismissed. A blur preview's
    results carry its images (``previews``, signed links) and the faces found."""
    active = active_run(session, dataset)
    last = session.scalar(select(AutolabelJob).where(
        AutolabelJob.dataset_id == dataset.id, AutolabelJob.status.not_in(jobs.ACTIVE),
        AutolabelJob.dismissed.is_(False)).order_by(AutolabelJob.created_at.desc()).limit(1))
    active_view = None if active is None else {
        **_common(active), "stopping": bool(active.stopping),
        "progress": {"processed": float(active.processed), "total": float(active.total)},
        "startedAt": iso(active.started_at or active.created_at) or ""}
    if active is not None and active.operation == "blur":
        active_view["previews"] = blur.preview_images(session, dataset, active, link)
    last_view = None
    if last is not None:
        results: dict[str, Any] = {"processed": int(last.processed), "annotations": int(last.annotations),
                                   "classes": len(last.classes or [])}
        if last.partial_images:
            results["partialImages"] = int(last.partial_images)
        if last.operation == "blur":
            results["faces"] = int(last.faces)
            results["previews"] = blur.preview_images(session, dataset, last, link)
        last_view = {**_common(last), "failed": last.status == jobs.FAILED,
                     "stopped": last.status == jobs.CANCELLED, "error": last.error, "results": results}
    return {"activeJob": active_view, "lastRun": last_view}


def stop_or_dismiss(session: Session, dataset: Dataset, preview_job_id: str | None) -> dict[str, Any]:
    """``datasets.delete_batch``: cancel the run in flight, else dismiss the last one's summary."""
    if preview_job_id:
        job = session.get(AutolabelJob, preview_job_id)
        if job is None or job.dataset_id != dataset.id:
            raise NotFound(f"run '{preview_job_id[:40]}' not found")
        job.dismissed = True
        return {"action": "dismissed", "jobId": job.id}
    active = active_run(session, dataset)
    if active is not None and jobs.cancel(session, active):
        return {"action": "cancelled", "jobId": active.id}
    last = session.scalar(select(AutolabelJob).where(
        AutolabelJob.dataset_id == dataset.id, AutolabelJob.status.not_in(jobs.ACTIVE),
        AutolabelJob.dismissed.is_(False)).order_by(AutolabelJob.created_at.desc()).limit(1))
    if last is None:
        return {"action": "none", "jobId": None}
    last.dismissed = True
    return {"action": "dismissed", "jobId": last.id}


def preview_view(session: Session, dataset: Dataset, job_id: str, link: Any) -> dict[str, Any]:
    """A preview's images (with their size) and the labels the model proposed: the dataset page draws them."""
    job = session.get(AutolabelJob, job_id)
    if job is None or job.dataset_id != dataset.id or not job.preview or job.operation != "annotate":
        raise NotFound(f"preview '{job_id[:40]}' not found")
    rows = {row.key: row for row in session.execute(
        select(DatasetItem.key, DatasetItem.name, DatasetItem.sha256, ImageBlob.width, ImageBlob.height)
        .join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
        .where(DatasetItem.manifest_id == dataset.manifest_id,
               DatasetItem.key.in_([p["key"] for p in job.previews or []])))}
    return {"jobId": job.id, "model": job.model_ref, "confidence": job.confidence,
            "classNames": [str(n) for n in dataset.class_names or []],
            "images": [{"imageId": f"{dataset.id}-{p['key']}", "name": rows[p["key"]].name,
                        "imageUrl": link(rows[p["key"]].sha256, rows[p["key"]].name),
                        "width": rows[p["key"]].width, "height": rows[p["key"]].height, "labels": p["labels"]}
                       for p in job.previews or [] if p["key"] in rows]}
