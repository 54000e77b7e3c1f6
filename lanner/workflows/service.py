"""Workflows of a workspace (``agents.list|save|delete``) and the collect template's settings.

Access is the workspace's: a viewer lists, an editor saves and deletes; anyone else gets the 404 of a workspace
that does not exist. Saving stores the document whatever its blocks say and answers the block errors; the collect
template is active only when its deployment is one of the workspace's and its dataset one that both the person
saving and the deployment's owner (the workspace) may write: anything else is a block error, never a capture
into someone else's dataset."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset
from lanner.db import iso, utcnow
from lanner.deployments.models import Deployment
from lanner.errors import Conflict, Forbidden, LannerError, NotFound
from lanner.teams import permissions
from lanner.workflows import template
from lanner.workflows.models import Workflow
from lanner.workflows.schemas import BlockError, Collect, Graph, WorkflowSave

LIST_LIMIT = 100


def workspace(session: Session, principal: Principal, owner: str | None, action: str) -> tuple[str, str]:
    return permissions.workspace_for(session, user_id=principal.user_id, username=principal.username, owner=owner,
                                     action=action)


def item(workflow: Workflow, owner: str, *, graph: bool) -> dict[str, Any]:
    found: dict[str, Any] = {"id": workflow.id, "username": owner, "name": workflow.name,
                             "version": workflow.version, "createdAt": iso(workflow.created_at),
                             "updatedAt": iso(workflow.updated_at)}
    if graph:
        found["graph"] = Graph.model_validate(workflow.graph or {}).model_dump()
    return found


def _live(owner_id: str) -> Any:
    return select(Workflow).where(Workflow.owner_id == owner_id, Workflow.deleted_at.is_(None))


def list_workflows(session: Session, principal: Principal, *, owner: str | None, id: str | None,  # noqa: A002
                   search: str | None) -> dict[str, Any]:
    """Up to 100, most recently updated first; with ``id``, that one with its graph (404 when it is not the
    workspace's)."""
    owner_id, owner_name = workspace(session, principal, owner, "read")
    if id:
        found = session.scalar(_live(owner_id).where(Workflow.id == id))
        if found is None:
            raise NotFound(f"workflow '{id[:40]}' not found")
        return {"workflows": [item(found, owner_name, graph=True)]}
    query = _live(owner_id)
    if search:
        query = query.where(func.lower(Workflow.name).contains(search.lower(), autoescape=True))
    rows = session.scalars(query.order_by(Workflow.updated_at.desc(), Workflow.id).limit(LIST_LIMIT))
    return {"workflows": [item(w, owner_name, graph=False) for w in rows]}


def get(session: Session, owner_id: str, workflow_id: str) -> Workflow:
    found = session.scalar(_live(owner_id).where(Workflow.id == workflow_id))
    if found is None:
        raise NotFound(f"workflow '{workflow_id[:40]}' not found")
    return found


def save(session: Session, principal: Principal, *, owner: str | None, body: WorkflowSave) -> dict[str, Any]:
    """Create (no ``id``, version 0) or replace the graph at ``version`` (409 when someone saved since)."""
    owner_id, _ = workspace(session, principal, owner, "write")
    if body.id:
        workflow = get(session, owner_id, body.id)
        if body.version != workflow.version:
            raise Conflict(f"workflow '{workflow.id}' is at version {workflow.version}, not {body.version}: "
                           "reload it and save again", code="version_conflict",
                           extra={"version": workflow.version})
        workflow.version += 1
    else:
        workflow = Workflow(owner_id=owner_id, version=1)
        session.add(workflow)
    workflow.name = body.name
    workflow.graph = body.graph.model_dump()
    errors = configure(session, principal, workflow)
    workflow.updated_at = utcnow()
    session.flush()
    return {"id": workflow.id, "version": workflow.version, "errors": [e.json() for e in errors]}


def delete(session: Session, principal: Principal, *, owner: str | None, workflow_id: str) -> None:
    owner_id, _ = workspace(session, principal, owner, "delete")
    workflow = get(session, owner_id, workflow_id)
    workflow.deleted_at, workflow.active = utcnow(), False


def configure(session: Session, principal: Principal, workflow: Workflow) -> list[BlockError]:
    """Read the collect template from the workflow's graph into its columns; the block errors of the graph."""
    collect, errors = template.read(Graph.model_validate(workflow.graph))
    workflow.active, workflow.deployment_id, workflow.dataset_id = False, None, None
    if collect is None:
        return errors
    deployment = session.scalar(select(Deployment).where(
        Deployment.owner_id == workflow.owner_id, Deployment.slug == collect.deployment,
        Deployment.deleted_at.is_(None)))
    if deployment is None:
        errors.append(BlockError(collect.deployment_block, "Deployment",
                                 f"deployment '{collect.deployment}' not found in this workspace"))
    dataset, why = writable_dataset(session, principal, workflow.owner_id, collect.dataset)
    if dataset is None:
        errors.append(BlockError(collect.dataset_block, "Dataset", why))
    if deployment is None or dataset is None:
        return errors
    workflow.deployment_id, workflow.dataset_id, workflow.active = deployment.id, dataset.id, True
    workflow.conf_low, workflow.conf_high, workflow.rate = collect.low, collect.high, collect.rate
    workflow.daily_cap, workflow.include_empty, workflow.split = (collect.daily_cap, collect.include_empty,
                                                                  collect.split)
    return errors


def writable_dataset(session: Session, principal: Principal, owner_id: str, name: str) -> tuple[Dataset | None, str]:
    """The dataset ``name`` (``slug`` of the workspace, or ``owner/slug``) when the caller and the workspace
    (the deployment's owner) may both write it; else None and why, worded as for a dataset that does not
    exist when the caller may not see it."""
    owner, _, slug = name.strip().rpartition("/")
    if not owner:
        owner = session.scalar(select(User.username).where(User.id == owner_id)) or ""
    try:
        dataset = datasets_service.get_dataset(session, principal, owner=owner, slug=slug, write=True)
    except (NotFound, Forbidden) as error:
        return None, error.message if isinstance(error, LannerError) else str(error)
    if not permissions.can(session, user_id=owner_id, owner_id=dataset.owner_id, action="write"):
        return None, (f"dataset '{owner}/{slug}' is not one the deployment's workspace may write: collect into a "
                      "dataset of the same workspace")
    return dataset, ""


def for_deployment(session: Session, deployment: Deployment) -> Workflow | None:
    """The newest workflow collecting from ``deployment`` (what the deployment page shows and edits)."""
    return session.scalar(select(Workflow).where(
        Workflow.deployment_id == deployment.id, Workflow.deleted_at.is_(None))
        .order_by(Workflow.active.desc(), Workflow.updated_at.desc()).limit(1))


def active_for(session: Session, deployment_ids: list[str] | None = None) -> list[Workflow]:
    query = select(Workflow).where(Workflow.active.is_(True), Workflow.deleted_at.is_(None),
                                   Workflow.deployment_id.is_not(None))
    if deployment_ids is not None:
        query = query.where(or_(*(Workflow.deployment_id == d for d in deployment_ids)))
    return list(session.scalars(query))


def collect_of(workflow: Workflow) -> Collect | None:
    found, _ = template.read(Graph.model_validate(workflow.graph or {}))
    return found


def save_collect(session: Session, principal: Principal, deployment: Deployment, collect: Collect, *,
                 enabled: bool) -> tuple[Workflow, list[BlockError]]:
    """The deployment page's form: the deployment's collect workflow written (created the first time) from the
    form's values; ``enabled`` false keeps the settings and stops collecting."""
    workflow = for_deployment(session, deployment)
    if workflow is None:
        workflow = Workflow(owner_id=deployment.owner_id, version=0, name=f"Collect uncertain: {deployment.slug}")
        session.add(workflow)
    workflow.version = (workflow.version or 0) + 1
    workflow.graph = Graph.model_validate(template.build(collect)).model_dump()
    errors = configure(session, principal, workflow)
    workflow.deployment_id = deployment.id  # kept when the dataset was refused: the page edits this one again
    if not enabled:
        workflow.active = False
    workflow.updated_at = utcnow()
    session.flush()
    return workflow, errors
