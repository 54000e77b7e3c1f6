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
