"""``models.clone`` and ``projects.clone``: a copy, in the caller's own workspace, of a model or project the
caller may read (their own, another user's public one, or an official one).

A model's copy costs one row: it shares the weights blob by digest (the collector keeps a blob while any model
names it, so deleting the original leaves the copy whole) and copies what describes the model (task, classes,
final metrics, plots, training arguments). The epoch-by-epoch history belongs to the original's runs and stays
there; the copy points at its original (``clonedFrom``, ``sourceModel``) while the caller may still read it."""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.errors import Conflict, Forbidden, NotFound, Unprocessable
from lanner.projects import service
from lanner.projects.models import ModelRecord, Project
from lanner.resources import check_visibility
from lanner.slugs import slugify, unique_slug
from lanner.status import record_created
from lanner.teams import permissions

# A model being trained has no finished weights to copy yet.
TRAINING = ("pending", "starting", "running")
# What a copy takes from its original, as is (JSON values deep-copied).
COPIED = ("description", "task", "status", "epochs", "best_epoch", "best_fitness", "metrics", "train_args",
          "results", "class_names", "plots", "environment", "model_info", "base_model", "weights_sha256",
          "weights_size", "weights_name", "started_at", "completed_at")


def target_workspace(session: Session, principal: Principal, owner: str | None) -> tuple[str, str]:
    """(id, name) of the workspace a clone goes into: the caller's own, or a team of theirs where they may write
    (a viewer gets the permission table's 403)."""
    try:
        return permissions.workspace_for(session, user_id=principal.user_id, username=principal.username,
                                         owner=owner, action="write")
    except NotFound:
        raise Forbidden(f"you can only clone into your own workspace ('{principal.username}') or a team's, "
                        f"not '{owner}'") from None


def target_slug(value: str, what: str) -> str:
    if "/" in value:
        raise Unprocessable(f"{what}: '{value}' is a path; give a name in your workspace (and `owner` for whose)")
    slug = slugify(value)
    if not slug:
        raise Unprocessable(f"{what}: '{value}' must contain at least one letter or digit")
    return slug


def check_clonable(record: ModelRecord, where: str) -> None:
    if record.status in TRAINING:
        raise Conflict(f"model '{where}' is training: clone it once its run has finished")
    if record.weights_sha256 is None:
        raise Conflict(f"model '{where}' has no weights to clone")


def _flush(session: Session, row: Any, what: str) -> None:
    """Add ``row``; a name taken by a concurrent request at the same moment is a 409, not a 500."""
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:
        raise Conflict(f"{what} was created by another request at the same moment; try again") from None


def copy_model(session: Session, source: ModelRecord, project: Project, *, slug: str, name: str,
               description: str | None = None) -> ModelRecord:
    fields = {field: copy.deepcopy(getattr(source, field)) for field in COPIED}
    if description is not None:
        fields["description"] = description
    record = ModelRecord(project_id=project.id, owner_id=project.owner_id, slug=slug, name=name,
                         metadata_=copy.deepcopy(source.metadata_ or {}), cloned_from_id=source.id, **fields)
    _flush(session, record, f"model '{slug}'")
    record_created(session, record, reason=f"cloned from {source.id}")  # it starts in its original's status
    return record


def _target_project(session: Session, workspace: tuple[str, str], slug: str) -> Project:
    """The workspace's project ``slug``, created (private) when missing."""
    owner_id, owner_name = workspace
    project = session.scalar(select(Project).where(Project.owner_id == owner_id, Project.slug == slug))
    if project is None:
        project = Project(owner_id=owner_id, slug=slug, name=slug, tags=[], metadata_={})
        _flush(session, project, f"project '{owner_name}/{slug}'")
    return project


def clone_model(session: Session, principal: Principal, source: ModelRecord, *, where: str, project: str,
                owner: str | None = None, model: str | None = None, name: str | None = None,
                description: str | None = None) -> tuple[ModelRecord, Project]:
    """Copy ``source`` (already checked readable) into the caller's project ``project``, created if missing.
    Its slug is ``model``, else the original's; a taken slug gets ``-2``, ``-3``... unless ``model`` named it."""
    workspace = target_workspace(session, principal, owner)
    check_clonable(source, where)
    target = _target_project(session, workspace, target_slug(project, "project"))
    base = target_slug(model, "model") if model else source.slug
    taken = service.taken_model_slugs(session, target.id, base)
    if model and base in taken:
        raise Conflict(f"model '{workspace[1]}/{target.slug}/{base}' already exists")
    slug = unique_slug(base, taken)
    return copy_model(session, source, target, slug=slug, name=name or source.name, description=description), target


def clone_project(session: Session, principal: Principal, source: Project, *, where: str, owner: str | None = None,
                  project: str | None = None, name: str | None = None, description: str | None = None,
                  visibility: str | None = None, license: str | None = None,
                  models: list[str] | None = None) -> tuple[Project, int]:
    """Copy ``source`` (already checked readable) and its finished models with weights, or the models named
    in ``models``, into a new project of the caller's; returns it and how many models it got."""
    owner_id, owner_name = target_workspace(session, principal, owner)
    visibility = visibility or "private"
    check_visibility(visibility)
    records = service.list_models(session, source)
    if models is None:
        chosen = [m for m in records if m.status == "completed" and m.weights_sha256 is not None]
    else:
        by_slug = {m.slug: m for m in records}
        unknown = [slug for slug in models if slug not in by_slug]
        if unknown:
            raise Unprocessable(f"models: {', '.join(repr(s) for s in unknown)} not in project '{where}'")
        chosen = [by_slug[slug] for slug in dict.fromkeys(models)]
        for record in chosen:
            check_clonable(record, f"{where}/{record.slug}")
    base = target_slug(project or name or source.slug, "project")
    taken = session.scalars(select(Project.slug).where(Project.owner_id == owner_id,
                                                       Project.slug.like(f"{base}%")))
    taken_slugs = set(taken)
    if project and base in taken_slugs:
        raise Conflict(f"project '{owner_name}/{base}' already exists")
    copy_ = Project(owner_id=owner_id, slug=unique_slug(base, taken_slugs), name=name or source.name,
                    description=source.description if description is None else description, visibility=visibility,
                    tags=list(source.tags or []), license=license or source.license, icon_color=source.icon_color,
                    metadata_=copy.deepcopy(source.metadata_ or {}), cloned_from_id=source.id)
    _flush(session, copy_, f"project '{owner_name}/{copy_.slug}'")
    for record in chosen:
        copy_model(session, record, copy_, slug=record.slug, name=record.name)
    return copy_, len(chosen)


def clone_count(session: Session, column: Any, row_id: str) -> int:
    return int(session.scalar(select(func.count()).where(column == row_id)) or 0)


def model_lineage(session: Session, principal: Principal, record: ModelRecord) -> dict[str, Any]:
    """``cloneCount``, and where the model was cloned from while the caller may still read that model."""
    out: dict[str, Any] = {"cloneCount": clone_count(session, ModelRecord.cloned_from_id, record.id)}
    source = session.get(ModelRecord, record.cloned_from_id) if record.cloned_from_id else None
    project = session.get(Project, source.project_id) if source is not None else None
    if source is None or project is None or not service.can_read(session, principal, owner_id=project.owner_id,
                                                                 visibility=project.visibility):
        return out
    owner = session.scalar(select(User.username).where(User.id == project.owner_id))
    return {**out, "clonedFrom": source.id, "sourceModelId": source.id,
            "sourceModel": {"owner": owner, "project": project.slug, "projectName": project.name,
                            "model": source.slug, "modelName": source.name}}


def project_lineage(session: Session, principal: Principal, project: Project) -> dict[str, Any]:
    out: dict[str, Any] = {"cloneCount": clone_count(session, Project.cloned_from_id, project.id)}
    source = session.get(Project, project.cloned_from_id) if project.cloned_from_id else None
    if source is not None and service.can_read(session, principal, owner_id=source.owner_id,
                                               visibility=source.visibility):
        out["clonedFrom"] = source.id
    return out
