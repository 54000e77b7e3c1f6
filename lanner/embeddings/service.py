"""``datasets.embeddings`` / ``create_embeddings`` / ``delete_embeddings``: a dataset's analysis, which model it
uses, its progress and whether it is fresh.

A person may name the model (``modelId``, a Lanner extension of the request: the SDK sends no body; the web
forms' select): one they may read (their own, a team's, a public or official one), with weights, of a task whose
network has a backbone to embed with (``EMBEDDABLE``). That choice is the dataset's (``EmbeddingJob.chosen``)
until someone names another, or ``auto``. Otherwise the server picks (``choose_model``): the newest model
trained on the dataset that has weights and the dataset's task (``training.trained_on``), else the best
pretrained start the server has for that task (``projects.starting``: the operator's official weights, or the
demo's starting model), else 409 naming what to install. A dataset is *fresh* while every image has a vector
from the dataset's model (``current``: the chosen one, else the automatic pick), under this version's encoding
(``encoding.vector_key``: what a job's ``model_sha256`` is) (``freshness``); anything else is *stale*, and
``create_embeddings`` embeds only what is missing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import iso
from lanner.embeddings import jobs, schemas, vectors
from lanner.embeddings.encoding import vector_key
from lanner.embeddings.models import EmbeddingJob
from lanner.errors import Conflict, NotFound, Unprocessable
from lanner.projects import official, starting
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord, Project
from lanner.teams import permissions
from lanner.training.trained_on import trained_on

AUTO = "auto"  # modelId that drops a dataset's chosen model
EMBEDDABLE = ("detect", "segment", "pose", "obb", "classify")  # YOLO networks: a backbone (encoding._backbone)
MAX_OPTIONS = 200


@dataclass(frozen=True)
class Choice:
    model: ModelRecord
    label: str  # ul://owner/project/model
    chosen: bool = False  # named by a person, not the automatic pick
    trained: bool = False  # the automatic pick found a model trained on the dataset


def _label(session: Session, model: ModelRecord) -> str:
    project = session.get(Project, model.project_id)
    owner = projects_service.owner_name(session, project) if project else "?"
    return f"ul://{owner}/{project.slug if project else '?'}/{model.slug}"


def choose_model(session: Session, principal: Principal, dataset: Dataset) -> Choice:
    """The model a new analysis of ``dataset`` embeds with (see the module's docstring)."""
    for item in trained_on(session, principal, dataset):
        model = session.get(ModelRecord, item["id"])
        if model is not None and model.weights_sha256 and model.task == dataset.task and model.status == "completed":
            return Choice(model, _label(session, model), trained=True)
    start = starting.best(session, principal, dataset.task)
    model = session.get(ModelRecord, start.model_id) if start is not None else None
    if model is not None and model.weights_sha256:
        return Choice(model, start.uri if start is not None else _label(session, model))
    raise Conflict(f"no model to embed this {dataset.task} dataset with: train a model on it, or install official "
                   f"weights for the task (`{install_hint(dataset.task)}`)", code="no_embedding_model")


def install_hint(task: str) -> str:
    """The operator's command that installs official weights for ``task``."""
    return f"lanner models add-official {next(iter(official.FAMILIES), 'yolo11')}n{_suffix(task)}.pt"


def _readable(principal: Principal) -> Any:
    return (select(ModelRecord).join(Project, Project.id == ModelRecord.project_id)
            .where(or_(Project.owner_id == principal.user_id, Project.visibility == "public",
                       Project.owner_id.in_(permissions.team_ids(principal.user_id)))))


def pick(session: Session, principal: Principal, value: str) -> Choice:
    """The model a person named (its id, or ``ul://owner/project/model``): 404 unless they may read it, 422
    without weights or when its network cannot embed."""
    text = value.strip().removeprefix("ul://")
    parts = text.split("/")
    if len(parts) == 3 and all(parts):
        model = projects_service.get_model(session, principal, owner=parts[0], project=parts[1], model=parts[2])
    elif len(parts) == 1 and text:
        model = session.scalar(_readable(principal).where(ModelRecord.id == text).limit(1))
    else:
        raise Unprocessable("modelId must be a model id or ul://owner/project/model")
    if model is None:
        raise NotFound(f"model '{value[:200]}' not found")
    if not model.weights_sha256:
        raise Unprocessable("this model has no weights yet: train it first, or pick another", code="no_weights")
    if model.task not in EMBEDDABLE:
        raise Unprocessable(f"a {model.task or 'model without a task'} network cannot embed images: pick a "
                            f"{', '.join(EMBEDDABLE)} model", code="cannot_embed")
    return Choice(model, _label(session, model), chosen=True)


def _named(session: Session, dataset: Dataset) -> ModelRecord | None:
    """The model the dataset's latest job was asked for by name, while it still has weights (None: automatic)."""
    job = session.scalar(select(EmbeddingJob).where(EmbeddingJob.dataset_id == dataset.id)
                         .order_by(EmbeddingJob.created_at.desc(), EmbeddingJob.id.desc()).limit(1))
    model = session.get(ModelRecord, job.model_id) if job is not None and job.chosen and job.model_id else None
    return model if model is not None and model.weights_sha256 else None


def current(session: Session, principal: Principal, dataset: Dataset) -> Choice:
    """The dataset's model now: the one last named for it, if the caller may still read it, else the automatic
    pick (409 when there is none)."""
    model = _named(session, dataset)
    if model is not None and session.scalar(_readable(principal).where(ModelRecord.id == model.id)) is not None:
        return Choice(model, _label(session, model), chosen=True)
    return choose_model(session, principal, dataset)


def options(session: Session, principal: Principal, dataset: Dataset) -> dict[str, Any]:
    """What the web forms offer: ``auto`` (the automatic pick, None when the server has none, with ``why``),
    ``models`` the caller may name (id, label, task; the dataset's task first, their own first, newest first),
    ``selected`` (the dataset's named model's id, else ``auto``), and ``hint`` (what to do when there is none)."""
    try:
        automatic: Choice | None = choose_model(session, principal, dataset)
    except Conflict:
        automatic = None
    rows = session.execute(_readable(principal).add_columns(Project.slug, User.username)
                           .join(User, User.id == Project.owner_id)
                           .where(ModelRecord.weights_sha256.is_not(None), ModelRecord.task.in_(EMBEDDABLE))
                           .order_by((ModelRecord.task == dataset.task).desc(),
                                     (Project.owner_id == principal.user_id).desc(), ModelRecord.updated_at.desc())
                           .limit(MAX_OPTIONS)).all()
    models = [{"id": m.id, "label": f"ul://{owner}/{project}/{m.slug}", "task": m.task} for m, project, owner in rows]
    named = _named(session, dataset)
    selected = named.id if named is not None and any(m["id"] == named.id for m in models) else None
    auto = None if automatic is None else {
        "label": automatic.label, "why": "newest trained on this dataset" if automatic.trained
        else "the server's pretrained weights"}
    return {"auto": auto, "models": models, "hint": install_hint(dataset.task),
            "selected": selected or (AUTO if auto else models[0]["id"] if models else None)}


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


def training_head(session: Session, settings: Settings, job: EmbeddingJob) -> bool:
    """Whether the job's worker has embedded every image and is now training the vector key's copy-detection
    head (``embeddings.head``): its progress stands at 100 % meanwhile, a minute or more, which pages say."""
    return (job.status == jobs.RUNNING and job.total > 0 and job.processed >= job.total
            and vectors.wants_head(session, job, settings.embedding_head_min_images))


def latest_analysis(session: Session, dataset: Dataset) -> EmbeddingJob | None:
    """The dataset's latest completed analysis: its model digest is the one similar-images searches use."""
    return session.scalar(select(EmbeddingJob).where(EmbeddingJob.dataset_id == dataset.id,
                                                     EmbeddingJob.status == jobs.COMPLETED)
                          .order_by(EmbeddingJob.completed_at.desc(), EmbeddingJob.id).limit(1))


def freshness(session: Session, principal: Principal, dataset: Dataset) -> str:
    """``none`` (never analysed), ``fresh`` (the dataset's model now is the one of the latest analysis and every
    image of the dataset has a vector under it) or ``stale`` (new images, a newer model, or another one named):
    what a new ``create_embeddings`` would change. Label edits change nothing here: a vector depends on pixels
    only. A named model is the dataset's whoever looks: no automatic pick overrides it."""
    done = latest_analysis(session, dataset)
    if done is None:
        return "none"
    named = _named(session, dataset)
    try:
        digest = vector_key((named or choose_model(session, principal, dataset).model).weights_sha256 or "")
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


def create(session: Session, principal: Principal, settings: Settings, *, owner: str, slug: str,
           model_id: str | None = None) -> tuple[EmbeddingJob, bool]:
    """``datasets.create_embeddings``: the job under way if there is one, else a new queued job (True).
    ``model_id``: the model to embed with (``pick``), ``auto`` for the automatic pick, None for the dataset's
    model (``current``). The named model is checked first: a wrong one is refused even while a job runs."""
    dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slug, write=True)
    named = pick(session, principal, model_id) if model_id and model_id != AUTO else None
    if (active := active_job(session, dataset)) is not None:
        return active, False
    choice = named or (choose_model(session, principal, dataset) if model_id == AUTO
                       else current(session, principal, dataset))
    job = EmbeddingJob(dataset_id=dataset.id, owner_id=dataset.owner_id, model_id=choice.model.id,
                       model_sha256=vector_key(choice.model.weights_sha256 or ""), model_label=choice.label,
                       chosen=choice.chosen, revision=dataset.revision,
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
