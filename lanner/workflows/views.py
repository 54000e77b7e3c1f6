"""What the web shows of the collect template: a deployment's form (its values, the datasets it may collect
into) with the counters, and the one-line summary each row of the model page's deployments table carries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.datasets.models import Dataset
from lanner.db import iso
from lanner.deployments.models import Deployment
from lanner.workflows import service
from lanner.workflows.models import Workflow
from lanner.workflows.schemas import DEFAULT_CAP, DEFAULT_HIGH, DEFAULT_LOW, DEFAULT_RATE, SPLITS


def captured_today(workflow: Workflow, now: datetime) -> int:
    return workflow.captured_today if workflow.captured_day == now.date().isoformat() else 0


def summary(workflow: Workflow | None, now: datetime) -> dict[str, Any] | None:
    if workflow is None:
        return None
    return {"active": workflow.active, "today": captured_today(workflow, now), "cap": workflow.daily_cap}


def annotate_rows(session: Session, owner_id: str, rows: list[dict[str, Any]], now: datetime) -> None:
    """Each deployments-table row gains ``collect``: its workflow's state and today's count (None: none)."""
    if not rows:
        return
    found = {slug: (d_id) for slug, d_id in session.execute(select(Deployment.slug, Deployment.id).where(
        Deployment.owner_id == owner_id, Deployment.deleted_at.is_(None),
        Deployment.slug.in_([r["slug"] for r in rows])))}
    workflows: dict[str, Workflow] = {}
    for workflow in session.scalars(select(Workflow).where(
            Workflow.deployment_id.in_(list(found.values())), Workflow.deleted_at.is_(None))
            .order_by(Workflow.active, Workflow.updated_at)):
        workflows[workflow.deployment_id or ""] = workflow  # the active, then newest, wins
    for row in rows:
        row["collect"] = summary(workflows.get(found.get(row["slug"], "")), now)


def form(session: Session, deployment: Deployment, now: datetime) -> dict[str, Any]:
    """The form's values (the workflow's, else the defaults), the datasets offered and the counters."""
    workflow = service.for_deployment(session, deployment)
    collect = service.collect_of(workflow) if workflow is not None else None
    owner = session.scalar(select(User.username).where(User.id == deployment.owner_id)) or ""
    datasets = [{"slug": slug, "name": name} for slug, name in session.execute(
        select(Dataset.slug, Dataset.name).where(Dataset.owner_id == deployment.owner_id,
                                                 Dataset.deleted_at.is_(None), Dataset.purpose.is_(None))
        .order_by(Dataset.name, Dataset.slug))]
    target = session.get(Dataset, workflow.dataset_id) if workflow is not None and workflow.dataset_id else None
    return {
        "enabled": bool(workflow and workflow.active),
        "dataset": collect.dataset if collect else (datasets[0]["slug"] if datasets else ""),
        "low": collect.low if collect else DEFAULT_LOW, "high": collect.high if collect else DEFAULT_HIGH,
        "rate_percent": round((collect.rate if collect else DEFAULT_RATE) * 100, 2),
        "cap": collect.daily_cap if collect else DEFAULT_CAP,
        "include_empty": bool(collect and collect.include_empty), "split": collect.split if collect else "train",
        "splits": SPLITS, "datasets": datasets,
        "today": captured_today(workflow, now) if workflow else 0,
        "total": workflow.captured_total if workflow else 0,
        "last": iso(workflow.last_captured_at) if workflow else None,
        "workflow_id": workflow.id if workflow else None,
        "queue_url": f"/datasets/{owner}/{target.slug}/annotate" if target is not None else None,
        "dataset_url": f"/datasets/{owner}/{target.slug}" if target is not None else None,
    }


def feeding(session: Session, dataset: Dataset, now: datetime) -> list[dict[str, Any]]:
    """What the dataset page says of the collect workflows filling it, one entry per deployment: its name and
    slugs (for the links), how many active workflows collect from it, and today's images of their daily caps."""
    rows = session.execute(select(Workflow, Deployment, User.username)
                           .join(Deployment, Workflow.deployment_id == Deployment.id)
                           .join(User, User.id == Deployment.owner_id)
                           .where(Workflow.dataset_id == dataset.id, Workflow.active.is_(True),
                                  Workflow.deleted_at.is_(None), Deployment.deleted_at.is_(None))
                           .order_by(Deployment.name, Deployment.slug))
    found: dict[str, dict[str, Any]] = {}
    for workflow, deployment, owner in rows:
        entry = found.setdefault(deployment.id, {
            "deployment": deployment.name, "owner": owner, "owner_id": deployment.owner_id, "slug": deployment.slug,
            "project": deployment.project_slug, "model": deployment.model_slug, "workflows": 0, "today": 0, "cap": 0})
        entry["workflows"] += 1
        entry["today"] += captured_today(workflow, now)
        entry["cap"] += workflow.daily_cap
    return list(found.values())


def listing(session: Session, owner_id: str, now: datetime) -> list[dict[str, Any]]:
    """The Workflows page's rows (``service.LIST_LIMIT``, most recently changed first): each workflow's name, the
    template it resolved to (None: a graph Lanner saves but does not run), its deployment and target dataset
    (slugs for the links; None when unset or gone), whether it collects, and today's count of the cap."""
    workflows = list(session.scalars(select(Workflow).where(Workflow.owner_id == owner_id,
                                                            Workflow.deleted_at.is_(None))
                                     .order_by(Workflow.updated_at.desc(), Workflow.id).limit(service.LIST_LIMIT)))
    deployments = {d.id: d for d in session.scalars(select(Deployment).where(
        Deployment.id.in_({w.deployment_id for w in workflows if w.deployment_id}),
        Deployment.deleted_at.is_(None)))}
    datasets = {d.id: (d, owner) for d, owner in session.execute(
        select(Dataset, User.username).join(User, User.id == Dataset.owner_id).where(
            Dataset.id.in_({w.dataset_id for w in workflows if w.dataset_id}), Dataset.deleted_at.is_(None)))}
    rows = []
    for workflow in workflows:
        collect = service.collect_of(workflow)
        deployment = deployments.get(workflow.deployment_id or "")
        dataset, dataset_owner = datasets.get(workflow.dataset_id or "", (None, ""))
        rows.append({
            "id": workflow.id, "name": workflow.name, "collect": collect is not None,
            "deployment": {"name": deployment.name, "slug": deployment.slug, "project": deployment.project_slug,
                           "model": deployment.model_slug} if deployment else None,
            "named_deployment": collect.deployment if collect else None,
            "dataset": {"name": dataset.name, "url": f"/datasets/{dataset_owner}/{dataset.slug}"} if dataset else None,
            "named_dataset": collect.dataset if collect else None,
            "active": workflow.active, "today": captured_today(workflow, now), "cap": workflow.daily_cap,
            "total": workflow.captured_total, "updated": iso(workflow.updated_at)})
    return rows
