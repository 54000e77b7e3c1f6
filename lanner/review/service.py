"""A dataset's review scores: asking for them, recording what the worker predicted, reading them, and the Review
queue (the next image by mistakenness).

The model is picked as the embeddings pick theirs (``embeddings.service.choose_model``: the newest model trained
on the dataset, else the server's pretrained start), or named. Its classes map onto the dataset's by name
(``inference.service.class_map``). The run is the auto-annotation worker's (``autolabel.worker``: the same
inference, conversion and chunked hand-back, here with each box's confidence) at a low confidence, so that a
label with nothing under it shows; the server scores each image against its labels as the chunk arrives
(``scoring.mistakenness``) and, with the last one, adds uniqueness from the dataset's embedding index.

Scores are *fresh* while the dataset's revision is the job's and its model still has the weights it scored with;
*stale* scores still order the queue (and say so); *none* asks for a job."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.annotation import proposals
from lanner.context import AppContext
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import iso, utcnow
from lanner.embeddings import index
from lanner.embeddings import service as embeddings_service
from lanner.errors import Conflict, Forbidden, NotFound, Unprocessable
from lanner.inference import service as inference_service
from lanner.projects.models import ModelRecord
from lanner.review import jobs, scoring
from lanner.review.models import ImageScore, ReviewJob
from lanner.teams import permissions

CONFIDENCE = 0.05  # predictions kept: low, so a label with nothing under it is told from a doubtful one
TASKS = ("detect", "segment", "obb")  # labels with boxes


def members_dataset(session: Session, principal: Principal, owner: str, slug: str, *, write: bool = False
                    ) -> Dataset:
    """The dataset for a member of its workspace (its owner, or any role in its team): the scores are the team's
    to read, a viewer's change is the 403 naming the role it needs (``write``). Anyone else gets the 404 of a
    missing dataset, even a reader of a public one: an outsider learns nothing of its labels' quality."""
    dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slug)
    if not is_member(session, principal, dataset):
        raise NotFound(f"dataset '{owner}/{slug}' not found")
    if write:
        datasets_service.get_dataset(session, principal, owner=owner, slug=slug, write=True)
    return dataset


def is_member(session: Session, principal: Principal, dataset: Dataset) -> bool:
    return permissions.role_in(session, user_id=principal.user_id, owner_id=dataset.owner_id) is not None


def editable(session: Session, principal: Principal, owner: str, slug: str) -> Dataset:
    """The dataset if the caller may edit it; the 404 of a missing one otherwise (the pages: a viewer is not
    offered what it may not do)."""
    try:
        return datasets_service.get_dataset(session, principal, owner=owner, slug=slug, write=True)
    except Forbidden:
        raise NotFound(f"dataset '{owner}/{slug}' not found") from None


def models(session: Session, principal: Principal, dataset: Dataset) -> list[dict[str, Any]]:
    """Models the caller may read that fit the dataset's task and know at least one of its classes (the
    labelling assistant's proposal models): what the Review page offers."""
    return [m for m in proposals.proposal_models(session, principal, dataset) if m["matched"]]


def _choice(session: Session, principal: Principal, dataset: Dataset, model_id: str | None) -> tuple[Any, str]:
    """The named model; else the one the embeddings would pick when it knows the dataset's classes (a model
    trained on it); else the caller's newest model that does; else 409 ``no_review_model``."""
    if model_id:
        record, ref = proposals.resolve_model(session, principal, model_id)
        if record.task and record.task != dataset.task:
            raise Unprocessable(f"a {record.task} model cannot score a {dataset.task} dataset")
        return record, f"ul://{ref}"
    try:
        choice = embeddings_service.choose_model(session, principal, dataset)
        names = {str(n).lower() for n in dataset.class_names or []}
        if any(str(n).lower() in names for n in choice.model.class_names or []):
            return choice.model, choice.label
    except Conflict:
        pass
    for view in models(session, principal, dataset):
        return proposals.resolve_model(session, principal, view["id"])[0], f"ul://{view['ref']}"
    raise Conflict("no model knows this dataset's classes: train a model on it, then compute review scores",
                   code="no_review_model")


def _class_map(record: Any, dataset: Dataset) -> list[int | None]:
    model_names = [str(n) for n in record.class_names or []]
    targets = inference_service.class_map(None, model_names=model_names,
                                          dataset_names=[str(n) for n in dataset.class_names or []])
    targets = list(range(len(model_names))) if targets is None else targets
    if not any(t is not None for t in targets):
        raise Unprocessable("none of the model's classes (" + ", ".join(model_names[:10]) + ") is a class of this "
                            "dataset: train a model on it first", code="no_matching_classes")
    return targets


def active_job(session: Session, dataset: Dataset) -> ReviewJob | None:
    return session.scalar(select(ReviewJob).where(ReviewJob.dataset_id == dataset.id,
                                                  ReviewJob.status.in_(jobs.ACTIVE))
                          .order_by(ReviewJob.created_at.desc()).limit(1))


def latest_job(session: Session, dataset: Dataset) -> ReviewJob | None:
    return session.scalar(select(ReviewJob).where(ReviewJob.dataset_id == dataset.id,
                                                  ReviewJob.status == jobs.COMPLETED)
                          .order_by(ReviewJob.completed_at.desc(), ReviewJob.id).limit(1))


def request(session: Session, principal: Principal, dataset: Dataset, model_id: str | None = None
            ) -> tuple[ReviewJob, bool]:
    """The job under way, else a new queued one (True). The caller checked write access."""
    if dataset.task not in TASKS:
        raise Unprocessable(f"review scores compare boxes: a {dataset.task} dataset has none")
    if (active := active_job(session, dataset)) is not None:
        return active, False
    record, label = _choice(session, principal, dataset, model_id)
    if not record.weights_sha256:
        raise Conflict(f"model '{label}' has no weights on this server", code="no_weights")
    keys = list(session.scalars(select(DatasetItem.key).where(  # labelled images: the rest are "Label next"'s
        DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.labels.is_not(None))
        .order_by(DatasetItem.name, DatasetItem.key)))
    if not keys:
        raise Conflict("this dataset has no labelled images to review", code="no_labelled_images")
    imgsz = int((record.train_args or {}).get("imgsz") or 640)
    job = ReviewJob(dataset_id=dataset.id, owner_id=dataset.owner_id, model_id=record.id,
                    model_sha256=record.weights_sha256, model_label=label, revision=dataset.revision, imgsz=imgsz,
                    confidence=CONFIDENCE, class_map=_class_map(record, dataset), keys=keys, total=len(keys),
                    status=jobs.QUEUED)
    return jobs.create(session, job), True


def cancel(session: Session, dataset: Dataset) -> str | None:
    job = active_job(session, dataset)
    return job.id if job is not None and jobs.cancel(session, job) else None


# --- what the worker hands back ------------------------------------------------------------------

def worker_job(session: Session, job_id: str, slot: str) -> ReviewJob:
    job = session.get(ReviewJob, job_id)
    if job is None or not job.slot or job.slot != slot:
        raise NotFound("review scores attempt not found")
    if job.status not in jobs.LAUNCHED:
        raise Conflict(f"this review scores job is {job.status}: its predictions are no longer taken")
    return job


def recorded_keys(session: Session, job: ReviewJob) -> set[str]:
    return set(session.scalars(select(ImageScore.key).where(ImageScore.job_id == job.id)))


def remaining_keys(session: Session, job: ReviewJob) -> list[str]:
    done = recorded_keys(session, job)
    return [k for k in job.keys if k not in done]


def record_chunk(session: Session, ctx: AppContext, job: ReviewJob, results: list[dict[str, Any]]
                 ) -> dict[str, Any]:
    """Score each image of a chunk once against its labels as they are now (raw, until ``finish`` calibrates
    them); with the last image, finish the job."""
    wanted, done = set(job.keys), recorded_keys(session, job)
    fresh = {str(r["key"]): r for r in results if str(r.get("key")) in wanted and str(r["key"]) not in done}
    dataset = session.get(Dataset, job.dataset_id)
    if dataset is None:
        raise NotFound("dataset not found")
    items = {item.key: item for item in session.scalars(select(DatasetItem).where(
        DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.key.in_(list(fresh))))}
    for key, result in fresh.items():
        item = items.get(key)
        predictions = [{**p, "confidence": float(c)} for p, c in zip(
            result.get("labels") or [], result.get("confidences") or [], strict=False)]
        score = scoring.mistakenness(item.labels or [] if item else [], predictions)
        session.merge(ImageScore(dataset_id=dataset.id, key=key, job_id=job.id, mistakenness=score.mistakenness,
                                 uniqueness=None, findings=score.findings, kinds=score.kinds, reviewed_at=None))
    job.processed += len(fresh)
    session.flush()
    if job.status in jobs.LAUNCHED and job.processed >= job.total:
        finish(session, ctx, job, dataset)
    return {"recorded": len(fresh), "processed": job.processed, "total": job.total, "status": job.status}


def finish(session: Session, ctx: AppContext, job: ReviewJob, dataset: Dataset) -> None:
    """The last image is in: scores of images no longer in the dataset go, mistakenness is calibrated over the
    whole dataset (``scoring.calibrated``), uniqueness is added when the dataset has an embedding analysis, and
    the job completes."""
    session.execute(delete(ImageScore).where(ImageScore.dataset_id == dataset.id, ImageScore.job_id != job.id))
    rows = list(session.scalars(select(ImageScore).where(ImageScore.dataset_id == dataset.id)))
    for row, value in zip(rows, scoring.calibrated([row.kinds or {} for row in rows]), strict=True):
        row.mistakenness = value
    session.flush()
    add_uniqueness(session, ctx, dataset)
    jobs.complete(session, job)


def add_uniqueness(session: Session, ctx: AppContext, dataset: Dataset) -> int:
    """Each scored image's uniqueness from the dataset's latest embedding analysis (its faiss index: k+1 nearest
    of every vector, itself among them); how many images got one."""
    analysis = embeddings_service.latest_analysis(session, dataset)
    if analysis is None:
        return 0
    found = index.load(session, ctx, dataset, analysis.model_sha256, build_large=True)  # a job: it may wait
    n = len(found.hashes)
    if n < 2:
        return 0
    k = min(scoring.UNIQUENESS_K, n - 1)
    sims, rows = found.index.search(found.index.reconstruct_n(0, n), k + 1)
    values = scoring.uniqueness(sims, rows)
    by_hash = dict(zip(found.hashes, values.tolist(), strict=True))
    keys = session.execute(select(DatasetItem.key, DatasetItem.sha256).where(
        DatasetItem.manifest_id == dataset.manifest_id))
    count = 0
    for key, sha in keys:
        if sha in by_hash:
            session.execute(update(ImageScore).where(ImageScore.dataset_id == dataset.id, ImageScore.key == key)
                            .values(uniqueness=by_hash[sha]))
            count += 1
    return count


# --- reading -------------------------------------------------------------------------------------

def freshness(session: Session, dataset: Dataset, job: ReviewJob | None) -> str:
    """``none`` (never scored), ``fresh`` (the labels are as scored and the job's model still has the weights it
    scored with) or ``stale`` (a label edit since, or the model retrained or deleted: its scores still order the
    queue)."""
    if job is None:
        return "none"
    model = session.get(ModelRecord, job.model_id) if job.model_id else None
    same_model = model is not None and model.weights_sha256 == job.model_sha256
    return "fresh" if job.revision == dataset.revision and same_model else "stale"


def status(session: Session, principal: Principal, dataset: Dataset) -> dict[str, Any]:
    done, active = latest_job(session, dataset), active_job(session, dataset)
    reviewed = session.scalar(select(ImageScore.key).where(ImageScore.dataset_id == dataset.id,
                                                            ImageScore.reviewed_at.is_not(None)).limit(1))
    return {"scores": freshness(session, dataset, done),
            "model": done.model_label if done else None, "scoredAt": iso(done.completed_at) if done else None,
            "revision": done.revision if done else None, "inPass": reviewed is not None,
            "activeJob": None if active is None else {
                "id": active.id, "status": active.status, "model": active.model_label,
                "progress": {"processed": active.processed, "total": active.total}}}


def scores(session: Session, dataset: Dataset, *, sort: str, limit: int, offset: int) -> dict[str, Any]:
    column = ImageScore.uniqueness if sort == "uniqueness" else ImageScore.mistakenness
    rows = session.execute(select(ImageScore, DatasetItem.name).join(DatasetItem, (
        DatasetItem.manifest_id == dataset.manifest_id) & (DatasetItem.key == ImageScore.key))
        .where(ImageScore.dataset_id == dataset.id, column.is_not(None))
        .order_by(column.desc(), ImageScore.key).limit(limit).offset(offset))
    return {"images": [view(dataset, row, name) for row, name in rows]}


def view(dataset: Dataset, row: ImageScore, name: str | None = None) -> dict[str, Any]:
    return {"key": row.key, "imageId": f"{dataset.id}-{row.key}", "name": name,
            "mistakenness": round(row.mistakenness, 4),
            "uniqueness": None if row.uniqueness is None else round(row.uniqueness, 4),
            "findings": row.findings, "reviewed": row.reviewed_at is not None}


def map_fields(session: Session, dataset: Dataset, keys: list[str]) -> list[dict[str, Any]]:
    """The scores as the dataset map's colour-by number fields (``embeddings.map_points``' shape), a value per
    key in ``keys``' order, None for an image without one (the map greys it); no field without scores."""
    found = {key: (mistaken, unique) for key, mistaken, unique in session.execute(
        select(ImageScore.key, ImageScore.mistakenness, ImageScore.uniqueness)
        .where(ImageScore.dataset_id == dataset.id))}
    if not found:
        return []
    mistaken = [None if (row := found.get(key)) is None else round(row[0], 4) for key in keys]
    fields = [{"name": "mistakenness", "label": "Mistakenness", "kind": "number",
               "unit": "(1 = the Review queue's head)", "values": mistaken}]
    unique = [None if (row := found.get(key)) is None or row[1] is None else round(row[1], 4) for key in keys]
    if any(value is not None for value in unique):
        fields.append({"name": "uniqueness", "label": "Uniqueness", "kind": "number",
                       "unit": "(1 = the most isolated image)", "values": unique})
    return fields


def image_score(session: Session, dataset: Dataset, key: str) -> dict[str, Any] | None:
    row = session.get(ImageScore, (dataset.id, key))
    return None if row is None else view(dataset, row)


def next_for_review(session: Session, dataset: Dataset, *, restart: bool = False) -> dict[str, Any] | None:
    """The unreviewed image with the highest mistakenness, marked reviewed (this pass); None when the pass has
    seen every scored image (``restart`` begins a new pass) or there are no scores."""
    if restart:
        session.execute(update(ImageScore).where(ImageScore.dataset_id == dataset.id).values(reviewed_at=None))
    row = session.scalar(select(ImageScore).where(ImageScore.dataset_id == dataset.id,
                                                  ImageScore.reviewed_at.is_(None))
                         .order_by(ImageScore.mistakenness.desc(), ImageScore.key).limit(1).with_for_update())
    if row is None:
        return None
    row.reviewed_at = utcnow()
    return view(dataset, row)
