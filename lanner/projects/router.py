"""SDK ``projects.*`` and ``models.*`` endpoints (a model's training job and its cancel are training's routes)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.bounds import PageSize
from lanner.http.deps import Ctx, DbSession
from lanner.projects import clones, service
from lanner.projects.models import ModelRecord, Project
from lanner.projects.schemas import (
    REGION,
    ModelClone,
    ModelCreate,
    ModelUpdate,
    ProjectClone,
    ProjectCreate,
    ProjectUpdate,
    model_item,
    model_summary,
    project_item,
)
from lanner.projects.service import ModelHooks
from lanner.resources import TransferRequest

router = APIRouter(tags=["projects"])


async def get_model_hooks(request: Request) -> ModelHooks:
    """Set by ``create_app`` (training's view of models); async: no I/O."""
    return request.app.state.model_hooks


Hooks = Annotated[ModelHooks, Depends(get_model_hooks)]


@router.post("/api/projects", status_code=201)
def create_project(body: ProjectCreate, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    project = service.create_project(
        session, principal, slug=body.project, name=body.name, owner=body.owner, description=body.description,
        visibility=body.visibility, tags=body.tags, license=body.license, metadata=body.metadata,
    )
    return {"id": project.id, "owner": (body.owner or principal.username).lower(), "project": project.slug,
            "region": REGION}


@router.get("/api/projects/{owner}")
def list_projects(owner: str, principal: CurrentPrincipal, session: DbSession,
                  limit: PageSize | None = None) -> dict[str, Any]:
    projects = service.list_projects(session, principal, owner=owner, limit=limit)
    counts = service.model_counts(session, [p.id for p in projects])
    items = [project_item(p, owner=owner.lower(), model_count=counts.get(p.id, 0)) for p in projects]
    return {"projects": items, "total": len(items), "region": REGION}


@router.get("/api/projects/{owner}/{project}")
def retrieve_project(owner: str, project: str, principal: CurrentPrincipal, session: DbSession, hooks: Hooks,
                     search: str | None = None) -> dict[str, Any]:
    proj = service.get_project(session, principal, owner=owner, slug=project)
    models = service.list_models(session, proj)
    if search:
        needle = search.lower()
        models = [m for m in models if needle in m.name.lower() or needle in m.slug]
    epoch_counts = hooks.epoch_counts(session, [m.id for m in models])
    item = project_item(proj, owner=service.owner_name(session, proj), model_count=len(models),
                        model_names=[m.name for m in models])
    item.update(metadata=proj.metadata_ or {}, **clones.project_lineage(session, principal, proj))
    return {
        "project": item,
        "models": [model_summary(m, epoch_count=int(epoch_counts.get(m.id, 0))) for m in models],
        "isOwner": proj.owner_id == principal.user_id,
    }


@router.patch("/api/projects/{owner}/{project}")
def update_project(owner: str, project: str, body: ProjectUpdate, principal: CurrentPrincipal,
                   session: DbSession) -> dict[str, Any]:
    proj = service.get_project(session, principal, owner=owner, slug=project, write=True)
    service.update_project(session, principal, proj, body.changes())
    return {"success": True, "project": proj.slug}


@router.delete("/api/projects/{owner}/{project}")
def delete_project(owner: str, project: str, principal: CurrentPrincipal, session: DbSession,
                   hooks: Hooks) -> dict[str, Any]:
    proj = service.get_project(session, principal, owner=owner, slug=project, write=True)
    return {"success": True, "cascadedModels": service.delete_project(session, proj, hooks=hooks)}


@router.post("/api/projects/{owner}/{project}/transfer", tags=["lanner"],
             summary="Move the project and its models to another workspace (a team's, or back to yours)",
             description="The same project and models (ids, runs, metrics, weights, exports) under a new owner; its "
             "old address keeps answering for it. Needs admin in the workspace it leaves (yours: you) and editor "
             "where it goes; refused while a run still holds credit.")
def transfer_project(owner: str, project: str, body: TransferRequest, principal: CurrentPrincipal,
                     session: DbSession, hooks: Hooks) -> dict[str, Any]:
    moved, new_owner = service.transfer_project(session, principal, owner=owner, slug=project, to_owner=body.owner,
                                                hooks=hooks)
    return {"success": True, "owner": new_owner, "project": moved.slug, "id": moved.id}


@router.post("/api/projects/{owner}/{project}/clone", status_code=201)
def clone_project(owner: str, project: str, body: ProjectClone, principal: CurrentPrincipal,
                  session: DbSession) -> dict[str, Any]:
    """Copy a project you may read, with its completed models (or those in ``models``), into your workspace."""
    source = service.get_project(session, principal, owner=owner, slug=project)
    copy, count = clones.clone_project(
        session, principal, source, where=f"{owner.lower()}/{project}", owner=body.owner, project=body.project,
        name=body.name, description=body.description, visibility=body.visibility, license=body.license,
        models=body.models)
    return {"id": copy.id, "owner": service.owner_name(session, copy), "project": copy.slug, "name": copy.name,
            "modelCount": count, "region": REGION}


# --- models --------------------------------------------------------------------------------------

@router.post("/api/models", status_code=201)
def create_model(body: ModelCreate, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    proj = service.get_project(session, principal, owner=body.owner or principal.username, slug=body.project,
                               write=True)
    record = service.create_model(
        session, proj, name=body.name or body.model or "model", slug=body.model, description=body.description,
        task=body.task, metadata=body.metadata, train_args=body.trainArgs, epochs=body.epochs,
    )
    return {"id": record.id, "owner": (body.owner or principal.username).lower(), "project": proj.slug,
            "model": record.slug, "name": record.name, "region": REGION}


@router.get("/api/models/{owner}/{project}")
def list_models(owner: str, project: str, principal: CurrentPrincipal, session: DbSession,
                limit: PageSize | None = None) -> dict[str, Any]:
    proj = service.get_project(session, principal, owner=owner, slug=project)
    models = service.list_models(session, proj, limit=limit)
    owner_name = service.owner_name(session, proj)  # the path may be an address it moved from
    return {"models": [model_item(m, owner=owner_name, project=proj) for m in models], "region": REGION}


@router.get("/api/models/{owner}/{project}/{model}")
def retrieve_model(owner: str, project: str, model: str, principal: CurrentPrincipal, session: DbSession,
                   hooks: Hooks) -> dict[str, Any]:
    record = service.get_model(session, principal, owner=owner, project=project, model=model)
    proj = session.get(Project, record.project_id)
    assert proj is not None
    extra = {"metadata": record.metadata_ or {}, **hooks.details(session, record),
             **clones.model_lineage(session, principal, record)}
    return {"model": model_item(record, owner=service.owner_name(session, proj), project=proj, extra=extra),
            "isOwner": record.owner_id == principal.user_id}


@router.post("/api/models/{owner}/{project}/{model}/clone", status_code=201)
def clone_model(owner: str, project: str, model: str, body: ModelClone, principal: CurrentPrincipal,
                session: DbSession) -> dict[str, Any]:
    """Copy a model you may read (yours, public or official) into a project of yours, created if missing; the
    copy shares the weights."""
    source = service.get_model(session, principal, owner=owner, project=project, model=model)
    copy, target = clones.clone_model(
        session, principal, source, where=f"{owner.lower()}/{project}/{model}", project=body.project,
        owner=body.owner, model=body.model, name=body.name, description=body.description)
    return {"id": copy.id, "owner": service.owner_name(session, target), "project": target.slug, "model": copy.slug,
            "name": copy.name, "region": REGION}


@router.patch("/api/models/{owner}/{project}/{model}")
def update_model(owner: str, project: str, model: str, body: ModelUpdate, principal: CurrentPrincipal,
                 session: DbSession) -> dict[str, Any]:
    record = service.get_model(session, principal, owner=owner, project=project, model=model, write=True)
    renamed = service.update_model(session, record, body.changes())
    if renamed:
        return {"success": True, "slug": record.slug, "name": record.name, "renamed": True}
    return {"success": True, "model": record.slug}


@router.delete("/api/models/{owner}/{project}/{model}")
def delete_model(owner: str, project: str, model: str, principal: CurrentPrincipal, session: DbSession,
                 hooks: Hooks) -> dict[str, Any]:
    record = service.get_model(session, principal, owner=owner, project=project, model=model, write=True)
    hooks.check_delete(session, model_id=record.id)
    session.delete(record)
    return {"success": True}


@router.get("/api/models/{owner}/{project}/{model}/files")
def model_files(owner: str, project: str, model: str, principal: CurrentPrincipal, session: DbSession,
                ctx: Ctx) -> dict[str, Any]:
    """Signed download links; ``model=ul://owner/project/model`` in the trainer resolves through here."""
    record: ModelRecord = service.get_model(session, principal, owner=owner, project=project, model=model)
    if record.weights_sha256 is None:
        return {"files": []}
    name = record.weights_name or "best.pt"
    url = ctx.signer.download_url(record.weights_sha256, name)
    return {"files": [{"name": name, "size": float(record.weights_size or 0), "downloadUrl": url}]}
