"""Training's lookups and commands on models: which model a trainer's report or upload is about (with the
checks that may write to it), the latest run, cancelling it, and the guard on deleting a model whose run still
holds credit. The protocol (``protocol.py``), checkpoint uploads (``checkpoints.py``) and the read views
(``views.py``) build on these."""

from __future__ import annotations

import re

from sqlalchemy import func, select
from sqlalchemy.orm import Session, defer

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.errors import Conflict, Forbidden, NotFound, Unprocessable
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord, Project
from lanner.slugs import slugify
from lanner.teams import permissions
from lanner.training.models import Run
from lanner.training.state import ACTIVE, RunStatus, transition


def resolve_project_for_start(session: Session, principal: Principal, project: str) -> Project:
    """``owner/slug`` selects that workspace (the caller's only); any other path is a project of the caller."""
    raw = project.strip().strip("/")
    if not raw:
        raise Unprocessable("training_started: 'project' is required")
    owner, _, rest = raw.partition("/")
    owner_id = principal.user_id
    if rest:
        account = accounts_service.get_user_by_username(session, username=owner)
        if owner.lower() == principal.username:
            slug = slugify(rest.replace("/", "-"))
        elif account is not None and permissions.can(session, user_id=principal.user_id, owner_id=account.id,
                                                     action="train"):
            owner_id, slug = account.id, slugify(rest.replace("/", "-"))  # a team the caller trains in
        elif account is not None:
            raise Forbidden(f"this API key may not write to workspace '{owner}'")
        else:
            slug = slugify(raw.replace("/", "-"))
    else:
        slug = slugify(raw)
    if not slug:
        raise Unprocessable(f"training_started: project '{project}' has no usable name")
    return projects_service.get_or_create_project(session, owner_id=owner_id, slug=slug)


def writable_model(session: Session, principal: Principal, model_id: str) -> ModelRecord:
    """The model ``principal`` may train, report on or upload to: ``training.start``, the trainer's protocol and
    checkpoint uploads all check here."""
    model = session.get(ModelRecord, model_id)
    if model is None:
        raise NotFound(f"model '{model_id}' not found")
    project = session.get(Project, model.project_id)
    permissions.check(session, user_id=principal.user_id, owner_id=model.owner_id,
                      visibility=project.visibility if project is not None else "private", action="train",
                      missing=f"model '{model_id}' not found", read_only="this model is public but read-only for you")
    return model


def model_by_name(session: Session, principal: Principal, project: str | None, name: str | None) -> ModelRecord:
    """Legacy identity (project + name) for callers that send no modelId: the newest model with that slug."""
    if not project:
        raise Unprocessable("modelId is required (or project and name)")
    proj = resolve_project_for_start(session, principal, project)
    slug = slugify(name or "train")
    candidates = session.scalars(select(ModelRecord).where(
        ModelRecord.project_id == proj.id, ModelRecord.slug.like(f"{slug}%")
    ).order_by(ModelRecord.created_at.desc()))
    numbered = re.compile(rf"^{re.escape(slug)}(-\d+)?$")  # train, train-2, ... but not trainer
    model = next((m for m in candidates if numbered.match(m.slug)), None)
    if model is None:
        raise NotFound(f"model '{proj.slug}/{slug}' not found")
    return model


def latest_run(session: Session, model_id: str) -> Run | None:
    return session.scalar(select(Run).where(Run.model_id == model_id).order_by(Run.id.desc()).limit(1))


# What a list of runs does not show: the JSON a run carries (trainer arguments, environment, launch, estimate).
RUN_DETAIL_COLUMNS = (Run.train_args, Run.environment, Run.error, Run.launch, Run.estimate)


def latest_runs(session: Session, model_ids: list[str], *, summary: bool = False) -> dict[str, Run]:
    """``latest_run`` of many models in one query per 500: model id -> its newest run (models without a run are
    left out). ``summary``: without ``RUN_DETAIL_COLUMNS`` (each loads on first access)."""
    options = [defer(column) for column in RUN_DETAIL_COLUMNS] if summary else []
    runs: dict[str, Run] = {}
    for start in range(0, len(model_ids), 500):  # bound the IN list
        newest = (select(func.max(Run.id)).where(Run.model_id.in_(model_ids[start:start + 500]))
                  .group_by(Run.model_id))
        runs.update({run.model_id: run for run in session.scalars(select(Run).where(Run.id.in_(newest))
                                                                  .options(*options))})
    return runs


def model_url(public_url: str, owner: str, project: str, model: str) -> str:
    return f"{public_url.rstrip('/')}/{owner}/{project}/{model}"


def cancel_training(session: Session, model: ModelRecord) -> Run:
    """Mark the active run cancelled; the trainer learns it from its next webhook response."""
    run = latest_run(session, model.id)
    if run is None or run.status not in ACTIVE:
        raise Conflict("this model has no active training run to cancel")
    transition(session, run, RunStatus.CANCELLED, reason="cancelled_by_user")
    return run


def ensure_no_unsettled_runs(session: Session, *, project_id: str | None = None, model_id: str | None = None) -> None:
    """A run Lanner launched holds credit until it is settled: deleting its model first would strand the hold."""
    stmt = select(Run.id).join(ModelRecord, ModelRecord.id == Run.model_id).where(
        Run.executor.is_not(None), Run.settled_at.is_(None))
    stmt = stmt.where(ModelRecord.project_id == project_id) if project_id else stmt.where(ModelRecord.id == model_id)
    if session.scalar(stmt.limit(1)) is not None:
        raise Conflict("a training run of this model is still active or being settled: cancel it first "
                       "(DELETE .../training), then delete")


def pinned_dataset_version_id(session: Session, principal: Principal) -> int | None:
    """The dataset version a run captured at launch, for its worker's key (None for everyone else): the trainer
    asks for ``ul://`` data without a version, so the run's key decides what it trains on, at every relaunch."""
    if principal.run_id is None:
        return None
    run = session.get(Run, principal.run_id)
    return int(run.dataset_version_id) if run is not None and run.dataset_version_id else None
