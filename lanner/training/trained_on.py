"""Which models were trained on a dataset (SDK ``datasets.models``): the dataset page's "trained on this" and a
way to find every model a bad label may have reached.

A model counts when its trainer arguments name the dataset (``data=ul://owner/datasets/slug``, as ``yolo train``
and ``training.start`` send them; any address it was reachable at, so a dataset moved into a team still finds
the models trained before the move) or when a run Lanner launched captured one of its versions (then the
answer says which: ``datasetVersion``). Only models the caller may read are listed (theirs, their teams',
public ones), newest first.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Text, cast, or_, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetVersion
from lanner.db import iso
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord, Project
from lanner.projects.schemas import numeric_metrics
from lanner.teams.models import ResourceMove
from lanner.training import refs
from lanner.training.models import Run


def models_trained_on(session: Session, principal: Principal, *, owner: str, slug: str) -> dict[str, Any]:
    """``{models, count}`` for the dataset at ``owner/slug`` (404 where the caller may not read it)."""
    models = trained_on(session, principal, datasets_service.get_dataset(session, principal, owner=owner, slug=slug))
    return {"models": models, "count": len(models)}


def trained_on(session: Session, principal: Principal, dataset: Dataset) -> list[dict[str, Any]]:
    """The items of ``models_trained_on`` for a dataset the caller may read."""
    addresses = _addresses(session, dataset)
    versions = {str(v.id): v for v in session.scalars(select(DatasetVersion)
                                                       .where(DatasetVersion.dataset_id == dataset.id))}
    captured: dict[str, DatasetVersion] = {}
    if versions:
        for model_id, version_id in session.execute(select(Run.model_id, Run.dataset_version_id)
                                                    .where(Run.dataset_version_id.in_(versions))
                                                    .order_by(Run.id)):
            captured[model_id] = versions[version_id]  # the latest run's version wins
    # A cheap superset in SQL (the arguments' text mentions the slug), the exact match on the parsed URI here.
    names = or_(*(cast(ModelRecord.train_args, Text).like(f"%/datasets/{s}%") for s in {s for _, s in addresses}))
    rows = session.execute(select(ModelRecord, Project, User.username)
                           .join(Project, Project.id == ModelRecord.project_id)
                           .join(User, User.id == ModelRecord.owner_id)
                           .where(or_(ModelRecord.id.in_(captured), names) if captured else names)
                           .order_by(ModelRecord.created_at.desc(), ModelRecord.id)).all()
    models = [_item(record, project, username, captured.get(record.id)) for record, project, username in rows
              if (record.id in captured or _names(record, addresses))
              and projects_service.can_read(session, principal, owner_id=record.owner_id,
                                            visibility=project.visibility)]
    return models


def _addresses(session: Session, dataset: Dataset) -> set[tuple[str, str]]:
    """(owner, slug) the dataset answers at: where it is, and every address it moved from."""
    moved = session.execute(select(User.username, ResourceMove.from_slug)
                            .join(User, User.id == ResourceMove.from_owner_id)
                            .where(ResourceMove.kind == "dataset", ResourceMove.resource_id == dataset.id)).all()
    return {(datasets_service.owner_name(session, dataset), dataset.slug), *((o, s) for o, s in moved)}


def _names(record: ModelRecord, addresses: set[tuple[str, str]]) -> bool:
    parts = refs.dataset_parts(str((record.train_args or {}).get("data") or ""))
    return parts is not None and (parts[0].lower(), parts[1]) in addresses


def _item(record: ModelRecord, project: Project, owner: str, version: DatasetVersion | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": record.id, "owner": owner, "project": project.slug, "model": record.slug, "name": record.name,
        "status": record.status, "task": record.task, "epochs": record.epochs, "bestEpoch": record.best_epoch,
        "bestFitness": record.best_fitness, "metrics": numeric_metrics(record.metrics) if record.metrics else {},
        "startedAt": iso(record.started_at), "completedAt": iso(record.completed_at),
        "createdAt": iso(record.created_at), "projectIconColor": project.icon_color,
        "datasetVersion": {"version": version.version, "contentHash": version.content_hash} if version else None,
    }
    return {key: value for key, value in item.items() if value is not None}
