"""Projects and models: lookups with access checks, create/update/delete.

Projects know no other domain. What training knows about a model (its epochs, console, cost; whether a run
still holds credit) comes in through ``ModelHooks``, which ``create_app`` builds from training."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import exists, func, or_, select
from sqlalchemy.orm import Session, defer

from lanner.accounts import service as accounts_service
from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.db import iso
from lanner.errors import BadRequest, Conflict, NotFound
from lanner.projects import official
from lanner.projects.models import MODEL_STATUSES, TASKS, ModelRecord, Project
from lanner.resources import VISIBILITIES, apply_changes
from lanner.slugs import renamed_slug, slugify, unique_slug
from lanner.teams import permissions, transfers


class DeleteGuard(Protocol):
    def __call__(self, session: Session, *, project_id: str | None = None, model_id: str | None = None) -> None:
        """Raise (a 409) when the project's or model's rows must not go yet."""


@dataclass(frozen=True)
class ModelHooks:
    """What other domains add to models: epoch counts per model (project view), fields of the model view, and a
    veto on deletes (a run that holds credit must be settled first)."""

    epoch_counts: Callable[[Session, list[str]], Mapping[str, int]]
    details: Callable[[Session, ModelRecord], dict[str, Any]]
    check_delete: DeleteGuard


def can_read(session: Session, principal: Principal, *, owner_id: str, visibility: str) -> bool:
    """The caller's own, a public thing, or a team of theirs (the one lookup only when it is neither)."""
    return (principal.user_id == owner_id or visibility == "public"
            or permissions.readable_owner(session, user_id=principal.user_id, owner_id=owner_id))


def get_project(session: Session, principal: Principal, *, owner: str, slug: str, write: bool = False) -> Project:
    """404 for anything the caller may not see, so private names do not leak."""
    project = session.scalar(
        select(Project).join(User, User.id == Project.owner_id).where(
            User.username == owner.lower(), Project.slug == slug
        )
    )
    if project is None:  # moved to another workspace: the old address still answers (lanner/teams/transfers.py)
        moved = transfers.moved_to(session, "project", owner, slug)
        project = session.get(Project, moved) if moved else None
    official_owner = official.is_official_owner(owner)
    missing = (official.missing(slug) if official_owner else None) or f"project '{owner}/{slug}' not found"
    if project is None:
        raise NotFound(missing)
    permissions.check(session, user_id=principal.user_id, owner_id=project.owner_id, visibility=project.visibility,
                      action="write" if write else "read", missing=missing,
                      read_only=official.read_only_message(slug) if official_owner
                      else f"project '{owner}/{slug}' is public but read-only for you")
    return project


def owner_name(session: Session, project: Project) -> str:
    """The name of the workspace the project is in (a path may name an address it moved from)."""
    owner = session.get(User, project.owner_id)
    return owner.username if owner is not None else ""


def transfer_project(session: Session, principal: Principal, *, owner: str, slug: str, to_owner: str,
                     hooks: ModelHooks) -> tuple[Project, str]:
    """Move the project and its models to workspace ``to_owner`` (same ids: runs, metrics, weights, exports and
    endpoints stay attached). Refused while a run holds credit in the old workspace: its hold and charges must
    settle where they were taken."""
    project = get_project(session, principal, owner=owner, slug=slug)
    try:
        hooks.check_delete(session, project_id=project.id)
    except Conflict:
        raise Conflict(f"project '{owner}/{slug}' has a training run still active or being settled: let it "
                       "finish or cancel it, then move the project") from None
    _, new_owner = transfers.move(session, principal, project, kind="project", to_owner=to_owner, slug_taken=lambda
                                  owner_id, name: session.scalar(select(Project.id).where(
                                      Project.owner_id == owner_id, Project.slug == name)) is not None)
    for record in session.scalars(select(ModelRecord).where(ModelRecord.project_id == project.id)):
        record.owner_id = project.owner_id
    session.flush()
    return project, new_owner


def list_projects(session: Session, principal: Principal, *, owner: str, limit: int | None) -> list[Project]:
    """An unknown owner is answered like a known one with nothing public (an empty list): a 404 would tell
    anyone which usernames exist."""
    user = accounts_service.get_user_by_username(session, username=owner)
    if user is None:
        return []
    query = select(Project).where(Project.owner_id == user.id, Project.purpose.is_(None)).order_by(
        Project.created_at.desc())
    if not permissions.readable_owner(session, user_id=principal.user_id, owner_id=user.id):
        query = query.where(Project.visibility == "public")
    if limit:
        query = query.limit(limit)
    return list(session.scalars(query))


def create_project(session: Session, principal: Principal, *, slug: str | None, name: str,
                   owner: str | None = None, description: str = "", visibility: str = "private",
                   tags: list[str] | None = None, license: str | None = None,
                   metadata: dict[str, Any] | None = None) -> Project:
    owner_id, owner_name = permissions.workspace_for(session, user_id=principal.user_id,
                                                     username=principal.username, owner=owner)
    if visibility not in VISIBILITIES:
        raise BadRequest(f"visibility must be one of {', '.join(VISIBILITIES)}")
    slug = slugify(slug or name)
    if not slug:
        raise BadRequest("project name must contain at least one letter or digit")
    exists = session.scalar(select(Project.id).where(Project.owner_id == owner_id, Project.slug == slug))
    if exists:
        raise Conflict(f"project '{owner_name}/{slug}' already exists")
    project = Project(owner_id=owner_id, slug=slug, name=name or slug, description=description or "",
                      visibility=visibility, tags=tags or [], license=license, metadata_=metadata or {})
    session.add(project)
    session.flush()
    return project


def get_or_create_project(session: Session, *, owner_id: str, slug: str, purpose: str | None = None) -> Project:
    """The project ``slug`` of the owner, created (with ``purpose``, see ``OwnedResource``) when missing."""
    project = session.scalar(select(Project).where(Project.owner_id == owner_id, Project.slug == slug))
    if project is None:
        project = Project(owner_id=owner_id, slug=slug, name=slug, tags=[], metadata_={}, purpose=purpose)
        session.add(project)
        session.flush()
    return project


def update_project(session: Session, principal: Principal, project: Project, changes: dict[str, Any]) -> Project:
    apply_changes(session, project, changes, what="project", where=f"{principal.username}/",
                  fields={"archived": "archived", "iconColor": "icon_color"})
    session.flush()
    return project


def delete_project(session: Session, project: Project, *, hooks: ModelHooks) -> int:
    hooks.check_delete(session, project_id=project.id)
    count = session.scalar(select(func.count()).select_from(ModelRecord).where(
        ModelRecord.project_id == project.id)) or 0
    session.delete(project)
    session.flush()
    return int(count)


def model_counts(session: Session, project_ids: list[str]) -> dict[str, int]:
    if not project_ids:
        return {}
    rows = session.execute(select(ModelRecord.project_id, func.count()).where(
        ModelRecord.project_id.in_(project_ids)).group_by(ModelRecord.project_id))
    return {pid: int(n) for pid, n in rows}


def search_public(session: Session, *, q: str | None, tasks: list[str], limit: int,
                  offset: int) -> tuple[list[dict[str, Any]], bool]:
    """``explore.search``'s projects: public ones, newest first, matching ``q`` (name, slug, description) and
    holding a model of one of ``tasks`` when given. Returns the page and whether more follow."""
    query = select(Project).where(Project.visibility == "public")
    if q:
        pattern = f"%{q.lower()}%"
        query = query.where(or_(func.lower(Project.name).like(pattern), Project.slug.like(pattern),
                                func.lower(Project.description).like(pattern)))
    if tasks:
        query = query.where(exists().where(ModelRecord.project_id == Project.id, ModelRecord.task.in_(tasks)))
    projects = list(session.scalars(query.order_by(Project.updated_at.desc(), Project.id).offset(offset)
                                    .limit(limit + 1)))
    models: dict[str, list[tuple[str, int]]] = {p.id: [] for p in projects[:limit]}
    for project_id, name, size in session.execute(select(ModelRecord.project_id, ModelRecord.name,
                                                         ModelRecord.weights_size).where(
            ModelRecord.project_id.in_(models)).order_by(ModelRecord.created_at)):
        models[project_id].append((name, int(size or 0)))
    owners = {user_id: name for user_id, name in session.execute(select(User.id, User.username).where(
        User.id.in_({p.owner_id for p in projects})))}
    items = [{"id": p.id, "project": p.slug, "name": p.name, "description": p.description or "",
              "owner": owners.get(p.owner_id, ""), "visibility": p.visibility,
              **({"iconColor": p.icon_color} if p.icon_color else {}), "iconLetter": (p.name or p.slug)[:1].upper(),
              "modelCount": len(models[p.id]), "modelNames": [name for name, _ in models[p.id]],
              "totalBytes": float(sum(size for _, size in models[p.id])), "starCount": 0,
              "updatedAt": iso(p.updated_at)} for p in projects[:limit]]
    return items, len(projects) > limit


# --- models -------------------------------------------------------------------------------------

# What a list of models does not show: the JSON a model carries (metrics, arguments, plots...), several KB each.
DETAIL_COLUMNS = (ModelRecord.metrics, ModelRecord.train_args, ModelRecord.results, ModelRecord.class_names,
                  ModelRecord.plots, ModelRecord.environment, ModelRecord.model_info, ModelRecord.training_error,
                  ModelRecord.metadata_, ModelRecord.full_run_estimate)


def list_models(session: Session, project: Project, *, limit: int | None = None,
                summary: bool = False) -> list[ModelRecord]:
    """Newest first. ``summary``: without ``DETAIL_COLUMNS`` (each loads on first access), for lists of many."""
    query = select(ModelRecord).where(ModelRecord.project_id == project.id).order_by(ModelRecord.created_at.desc())
    if summary:
        query = query.options(*(defer(column) for column in DETAIL_COLUMNS))
    if limit:
        query = query.limit(limit)
    return list(session.scalars(query))


@dataclass(frozen=True)
class ModelRef:
    """Enough of a model to name and link it: ``/{owner}/{project_slug}/{slug}``."""

    name: str
    slug: str
    project_slug: str
    owner: str


def model_refs(session: Session, model_ids: set[str], *, owner_id: str) -> dict[str, ModelRef]:
    """The models among ``model_ids`` that ``owner_id`` owns (a ledger row or a hold names its model by id)."""
    if not model_ids:
        return {}
    stmt = (select(ModelRecord.id, ModelRecord.name, ModelRecord.slug, Project.slug, User.username)
            .join(Project, Project.id == ModelRecord.project_id).join(User, User.id == ModelRecord.owner_id)
            .where(ModelRecord.id.in_(model_ids), ModelRecord.owner_id == owner_id))
    return {row[0]: ModelRef(*row[1:]) for row in session.execute(stmt)}


def get_model(session: Session, principal: Principal, *, owner: str, project: str, model: str,
              write: bool = False) -> ModelRecord:
    official_missing = official.missing(project, model) if official.is_official_owner(owner) else None
    try:
        proj = get_project(session, principal, owner=owner, slug=project, write=write)
    except NotFound:
        if official_missing:
            raise NotFound(official_missing) from None
        raise
    record = session.scalar(select(ModelRecord).where(ModelRecord.project_id == proj.id, ModelRecord.slug == model))
    if record is None:
        raise NotFound(official_missing or f"model '{owner}/{project}/{model}' not found")
    return record


def taken_model_slugs(session: Session, project_id: str, base: str) -> list[str]:
    return list(session.scalars(select(ModelRecord.slug).where(
        ModelRecord.project_id == project_id, ModelRecord.slug.like(f"{base}%"))))


def create_model(session: Session, project: Project, *, name: str, slug: str | None = None,
                 unique: bool = False, **fields: Any) -> ModelRecord:
    base = slugify(slug or name) or "model"
    taken = taken_model_slugs(session, project.id, base)
    if unique:
        base = unique_slug(base, taken)
    elif base in taken:
        raise Conflict(f"model '{base}' already exists in this project")
    if fields.get("task") and fields["task"] not in TASKS:
        raise BadRequest(f"task must be one of {', '.join(TASKS)}")
    record = ModelRecord(project_id=project.id, owner_id=project.owner_id, slug=base, name=name or base,
                         metadata_=fields.pop("metadata", None) or {}, **fields)
    session.add(record)
    session.flush()
    return record


def update_model(session: Session, record: ModelRecord, changes: dict[str, Any]) -> bool:
    """Apply a PATCH; returns True when the slug changed."""
    renamed = False
    if changes.get("name") is not None:
        new_slug = renamed_slug(
            changes["name"], record.slug, what="model",
            taken=lambda slug: session.scalar(select(ModelRecord.id).where(
                ModelRecord.project_id == record.project_id, ModelRecord.slug == slug)) is not None)
        renamed = new_slug != record.slug
        record.slug, record.name = new_slug, changes["name"]
    if changes.get("status") is not None and changes["status"] not in MODEL_STATUSES:
        raise BadRequest(f"status must be one of {', '.join(MODEL_STATUSES)}")
    for field, attr in (("description", "description"), ("metadata", "metadata_"), ("trainArgs", "train_args"),
                        ("epochs", "epochs"), ("bestEpoch", "best_epoch"), ("bestFitness", "best_fitness"),
                        ("trainingError", "training_error")):
        if changes.get(field) is not None:
            setattr(record, attr, changes[field])
    session.flush()
    return renamed
