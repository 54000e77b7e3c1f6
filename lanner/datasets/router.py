"""SDK ``datasets.*`` endpoints for a dataset as a whole: create, list, retrieve, update, delete, import,
class and split edits, stats and health; and the dataset features a self-hosted Lanner cannot serve (501).

Images, versions (with clones, archives and restores), the trash and explore have their own routers
(``image_router``, ``version_router``, ``trash_router``, ``explore_router``).
Routers here are HTTP only: the logic is in the modules they call.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.bounds import PageSize
from lanner.datasets import edits, service, stats, trash
from lanner.datasets.dependencies import Imports
from lanner.datasets.health.report import health_report
from lanner.datasets.imports import jobs as import_jobs
from lanner.datasets.models import Dataset
from lanner.datasets.schemas import (
    DatasetCreate,
    DatasetUpdate,
    DeleteClassesRequest,
    IngestRequest,
    MergeClassesRequest,
    RedistributeRequest,
)
from lanner.db import after_commit
from lanner.errors import NotImplementedOnSelfHosted
from lanner.http.deps import Ctx, DbSession
from lanner.projects.schemas import REGION
from lanner.resources import TransferRequest
from lanner.storage import upload_sessions

router = APIRouter(tags=["datasets"])


@router.post("/api/datasets", status_code=201)
def create_dataset(body: DatasetCreate, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    dataset = service.create_dataset(
        session, principal, name=body.name, slug=body.dataset, owner=body.owner, description=body.description,
        visibility=body.visibility, task=body.task, class_names=body.classNames, tags=body.tags,
        license=body.license, metadata=body.metadata)
    return {"id": dataset.id, "owner": (body.owner or principal.username).lower(), "dataset": dataset.slug,
            "region": REGION}


@router.get("/api/datasets/{owner}")
def list_datasets(owner: str, principal: CurrentPrincipal, session: DbSession,
                  limit: PageSize | None = None) -> dict[str, Any]:
    datasets = service.list_datasets(session, principal, owner=owner, limit=limit)
    items = [service.dataset_view(session, d, owner=owner.lower()) for d in datasets]
    return {"datasets": items, "total": len(items), "region": REGION}


@router.get("/api/datasets/{owner}/{dataset}")
def retrieve_dataset(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset)
    view = service.dataset_view(session, record, owner=service.owner_name(session, record), versions=True)
    return {"dataset": {**view, "metadata": record.metadata_ or {}}}


@router.patch("/api/datasets/{owner}/{dataset}")
def update_dataset(owner: str, dataset: str, body: DatasetUpdate, principal: CurrentPrincipal,
                   session: DbSession) -> dict[str, Any]:
    updated = service.update_dataset(session, principal, owner=owner, slug=dataset, changes=body.changes())
    return {"success": True, "dataset": updated.slug}


@router.delete("/api/datasets/{owner}/{dataset}")
def delete_dataset(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    trash.trash_dataset(service.get_dataset(session, principal, owner=owner, slug=dataset, write=True))
    return {"success": True}


@router.post("/api/datasets/{owner}/{dataset}/transfer", tags=["lanner"],
             summary="Move the dataset to another workspace (a team's, or back to yours)",
             description="The same dataset (id, versions, images, labels) under a new owner; its old address keeps "
             "answering for it. Needs admin in the workspace it leaves (yours: you) and editor where it goes.")
def transfer_dataset(owner: str, dataset: str, body: TransferRequest, principal: CurrentPrincipal,
                     session: DbSession) -> dict[str, Any]:
    moved, new_owner = service.transfer_dataset(session, principal, owner=owner, slug=dataset, to_owner=body.owner)
    return {"success": True, "owner": new_owner, "dataset": moved.slug, "id": moved.id}


@router.post("/api/datasets/{owner}/{dataset}/ingest", status_code=202)
def ingest(owner: str, dataset: str, body: IngestRequest, principal: CurrentPrincipal, session: DbSession,
           imports: Imports, ctx: Ctx) -> dict[str, Any]:
    # 202 once the job is queued and the dataset ``processing`` for everyone (DbSession commits before the
    # answer); that commit wakes the import queue.
    staged = None
    if body.sessionId:  # a file PUT into a bucket: its size is checked before the transaction starts
        staged = upload_sessions.find_staged(ctx.db, ctx.blobs, owner_id=principal.user_id,
                                             session_id=body.sessionId, max_bytes=ctx.settings.max_upload_bytes)
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    job = import_jobs.start_import(session, principal, record, session_id=body.sessionId, staged=staged)
    after_commit(session, imports.wake)
    return {"jobId": job.id, "status": "queued"}


@router.get("/api/datasets/{owner}/{dataset}/class-stats")
def class_stats(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    return stats.class_stats(session, service.get_dataset(session, principal, owner=owner, slug=dataset))


@router.post("/api/datasets/{owner}/{dataset}/classes/merge")
def merge_classes(owner: str, dataset: str, body: MergeClassesRequest, principal: CurrentPrincipal,
                  session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    merged, target = edits.merge_classes(session, record, body.sourceClassIds, body.targetClassId)
    return _classes_edited(record, mergedClassIds=merged, targetClassId=target)


@router.post("/api/datasets/{owner}/{dataset}/classes/delete")
def delete_classes(owner: str, dataset: str, body: DeleteClassesRequest, principal: CurrentPrincipal,
                   session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    deleted, dropped = edits.delete_classes(session, record, body.classIds)
    return _classes_edited(record, deletedClassIds=deleted, deletedAnnotations=dropped)


def _classes_edited(record: Dataset, **result: Any) -> dict[str, Any]:
    """What a class edit answers: the dataset's class names after it, and the edit's own result."""
    return {"success": True, "classNames": list(record.class_names or []), "classColors": {}, **result}


@router.post("/api/datasets/{owner}/{dataset}/splits/redistribute")
def redistribute(owner: str, dataset: str, body: RedistributeRequest, principal: CurrentPrincipal,
                 session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    splits, modified = edits.redistribute(session, record, {"train": body.train, "val": body.val,
                                                            "test": body.test}, seed=body.seed)
    return {"success": True, "splits": splits, "modified": modified}


@router.get("/api/datasets/{owner}/{dataset}/health", tags=["lanner"],
            summary="Health report (Lanner extension)",
            description="Corrupt images, exact and near duplicates, unlabelled images, boxes outside the image or "
                        "of near-zero area, tiny objects, size outliers, train/val leakage and class imbalance. "
                        "`issues` counts images per issue code; filter the image list with `issue=<code>`.")
def dataset_health(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    return health_report(session, service.get_dataset(session, principal, owner=owner, slug=dataset))


# --- what a self-hosted platform cannot serve ----------------------------------------------------

_UNSUPPORTED = {
    ("POST", "/api/integrations/roboflow/import"): "Roboflow import needs Roboflow's cloud; export from Roboflow as "
                                                   "YOLO or COCO and upload the archive instead",
    ("POST", "/api/integrations/roboflow/preview"): "Roboflow import needs Roboflow's cloud",
}


def _not_implemented(message: str):
    def endpoint() -> None:
        raise NotImplementedOnSelfHosted(message)
    return endpoint


for (method, path), message in _UNSUPPORTED.items():
    router.add_api_route(path, _not_implemented(message), methods=[method], include_in_schema=True,
                         summary="Not available on self-hosted Lanner (501)")
