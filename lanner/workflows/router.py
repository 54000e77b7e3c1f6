"""SDK ``agents.list|save|delete`` (``/api/workflows``): workflow documents of a workspace. HTTP only: the logic
is in ``service``; a save tells this process's collector (``capture.Collector``) once it has committed."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.db import after_commit
from lanner.http.deps import DbSession
from lanner.workflows import service
from lanner.workflows.schemas import WorkflowSave

router = APIRouter(tags=["workflows"])
PATH = "/api/workflows"
Owner = Annotated[str | None, Query(max_length=64, description="Workspace username; defaults to yours")]


def _changed(request: Request, session: Any) -> None:
    collector = getattr(request.app.state, "workflows", None)
    if collector is not None:
        after_commit(session, collector.forget)


@router.get(PATH, summary="agents.list: the workspace's workflows, or one with its graph")
def list_workflows(principal: CurrentPrincipal, session: DbSession, owner: Owner = None,
                   id: Annotated[str | None, Query(max_length=32)] = None,  # noqa: A002  (the SDK's name)
                   search: Annotated[str | None, Query(max_length=200)] = None) -> dict[str, Any]:
    return service.list_workflows(session, principal, owner=owner, id=id, search=search)


@router.put(PATH, summary="agents.save: create a workflow, or replace its graph at a version",
            description="Answers the block errors; the workflow is saved either way. A graph of the collect "
            "template (a Deployment block into a Dataset block, through an optional confidence Gate) starts "
            "collecting that deployment's uncertain predictions into the dataset.")
def save_workflow(body: WorkflowSave, request: Request, principal: CurrentPrincipal, session: DbSession,
                  owner: Owner = None) -> dict[str, Any]:
    answer = service.save(session, principal, owner=owner, body=body)
    _changed(request, session)
    return answer


@router.delete(PATH, summary="agents.delete: the workflow goes to the trash and stops collecting")
def delete_workflow(request: Request, principal: CurrentPrincipal, session: DbSession,
                    id: Annotated[str, Query(max_length=32)], owner: Owner = None) -> dict[str, Any]:  # noqa: A002
    service.delete(session, principal, owner=owner, workflow_id=id)
    _changed(request, session)
    return {"success": True}
