"""``datasets.embeddings`` / ``create_embeddings`` / ``delete_embeddings``: a dataset's analysis, which model it
uses, its progress and whether it is fresh.

The SDK names no model, so the server picks one: the newest model trained on the dataset that has weights and
the dataset's task (``training.trained_on``), else the best pretrained start the server has for that task
(``projects.starting``: the operator's official weights, or the demo's starting model), else 409 naming what
to install. A dataset is *fresh* while every image has a vector from the model that would be picked now, under
this version's encoding (``encoding.vector_key``: what a job's ``model_sha256`` is) (``freshness``); anything else
is *stale*, and ``create_embeddings`` embeds only what is missing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import iso
from lanner.embeddings import jobs, schemas, vectors
from lanner.embeddings.encoding import vector_key
from lanner.embeddings.models import EmbeddingJob
from lanner.errors import Conflict
from lanner.projects import official, starting
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord, Project
from lanner.training.trained_on import trained_on


@dataclass(frozen=True)
class Choice:
    model: ModelRecord
    label: str  # ul://owner/project/model


def _label(session: Session, model: ModelRecord) -> str:
    project = session.get(Project, model.project_id)
    owner = projects_service.owner_name(session, project) if project else "?"
    return f"ul://{owner}/{project.slug if project else '?'}/{model.slug}"


def choose_model(session: Session, principal: Principal, dataset: Dataset) -> Choice:
    """The model a new analysis of ``dataset`` embeds with (see the module's docstring)."""
    for item in trained_on(session, principal, dataset):
        model = session.get(ModelRecord, item["id"])
        if model is not None and model.weights_sha256 and model.task == dataset.task and model.status == "completed":
            return Choice(model, _label(session, model))
    start = starting.best(session, principal, dataset.task)
    model = session.get(ModelRecord, start.model_id) if start is not None else None
    if model is not None and model.weights_sha256:
        return Choice(model, start.uri if start is not None else _label(session, model))
    family = next(iter(official.FAMILIES), "yolo11")
    raise Conflict(f"no model to embed this {dataset.task} dataset with: train a model on it, or install official "
                   f"weights for the task (`lanner models add-official {family}n{_suffix(dataset.task)}.pt`)",
                   code="no_embedding_model")


def _suffix(task: str) -> str:
    return {"segment": "-seg", "pose": "-pose", "obb": "-obb", "classify": "-cls"}.get(task, "")


def imgsz_for(model: ModelRecord, settings: Settings) -> int:
    if settings.embedding_imgsz:
        return settings.embedding_imgsz
    value = (model.train_args or {}).get("imgsz")
    return int(value) if isinstance(value, int | float) and value > 0 else 640


def active_job(session: Session, dataset: Dataset) -> EmbeddingJob | None:
    return session.scalar(select(EmbeddingJob).where(EmbeddingJob.dataset_id == dataset.id,
                                                     EmbeddingJob.status.in_(jobs.ACTIVE))
                          .order_by(EmbeddingJob.created_at.desc()).limit(1))


def latest_analysis(session: Session, dataset: Dataset) -> EmbeddingJob | None:
    """The dataset's latest completed analysis: its model digest is the one similar-images searches use."""
    return session.scalar(select(EmbeddingJob).where(EmbeddingJob.dataset_id == dataset.id,
                                                     EmbeddingJob.status == jobs.COMPLETED)
                          .order_by(EmbeddingJob.completed_at.desc(), EmbeddingJob.id).limit(1))


def freshness(session: Session, principal: Principal, dataset: Dataset) -> str:
    """``none`` (never analysed), ``fresh`` (the model that would be picked now is the one of the latest analysis
    and every image of the dataset has a vector under it) or ``stale`` (new images, or a newer model): what a new
    ``create_embeddings`` would change. Label edits change nothing here: a vector depends on pixels only."""
    done = latest_analysis(session, dataset)
    if done is None:
        return "none"
    try:
        digest = vector_key(choose_model(session, principal, dataset).model.weights_sha256)
    except Conflict:  # the model was deleted since: its vectors still answer
        digest = done.model_sha256
    probe = EmbeddingJob(dataset_id=dataset.id, model_sha256=done.model_sha256)
    vectors.count_progress(session, probe)
    return "fresh" if digest == done.model_sha256 and probe.processed == probe.total else "stale"


def status(session: Session, principal: Principal, *, owner: str, slug: str) -> dict[str, Any]:
    """``datasets.embeddings``: the latest analysis and the job under way (``DatasetsEmbeddingsResponse``)."""
    dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slug)
    done, active = latest_analysis(session, dataset), active_job(session, dataset)
    model_sha256 = (active or done).model_sha256 if (active or done) else None
    latest = session.scalar(select(func.max(DatasetItem.updated_at))
                            .where(DatasetItem.manifest_id == dataset.manifest_id))
    return {"analyzedAt": iso(done.completed_at) if done else None,
            "embeddingsCount": vectors.embedded_count(session, dataset, model_sha256) if model_sha256 else 0,
            "latestImageAt": iso(latest), "activeJob": schemas.active_job(active) if active else None}


def create(session: Session, principal: Principal, settings: Settings, *, owner: str, slug: str
           ) -> tuple[EmbeddingJob, bool]:
    """``datasets.create_embeddings``: the job under way if there is one, else a new queued job (True)."""
    dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slug, write=True)
    if (active := active_job(session, dataset)) is not None:
        return active, False
    choice = choose_model(session, principal, dataset)
    job = EmbeddingJob(dataset_id=dataset.id, owner_id=dataset.owner_id, model_id=choice.model.id,
                       model_sha256=vector_key(choice.model.weights_sha256), model_label=choice.label,
                       revision=dataset.revision,
                       imgsz=imgsz_for(choice.model, settings), status=jobs.QUEUED)
    vectors.count_progress(session, job)
    return jobs.create(session, job), True


def cancel(session: Session, principal: Principal, *, owner: str, slug: str) -> str | None:
    """``datasets.delete_embeddings``: cancel the job under way; its id, or None when there was none. The vectors
    it delivered are kept: a later analysis starts from them."""
    dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slug, write=True)
    job = active_job(session, dataset)
    return job.id if job is not None and jobs.cancel(session, job) else None


def worker_job(session: Session, job_id: str, slot: str) -> EmbeddingJob:
    """The job behind an attempt's signed worker link, while that attempt is the job's current one and active
    (a link of an older attempt, or of a cancelled job, is refused)."""
    job = session.get(EmbeddingJob, job_id)
    if job is None or job.slot is None or job.slot != slot:
        raise Conflict("this attempt of the embedding job is over", code="attempt_over")
    if job.status not in jobs.LAUNCHED:
        raise Conflict(f"this embedding job is {job.status}", code="attempt_over")
    return job
