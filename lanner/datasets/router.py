"""SDK ``datasets.*``, ``images.*``, ``upload.*``, ``lifecycle.*`` and ``explore.search`` endpoints."""

from __future__ import annotations

import logging
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Body, Query
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.accounts.service import Principal
from lanner.context import AppContext
from lanner.datasets import exports, service
from lanner.datasets import ingest as ingest_service
from lanner.datasets.models import Dataset, DatasetItem, DatasetVersion, ImageBlob
from lanner.datasets.records import ImportRefused
from lanner.datasets.schemas import (
    BulkSplitRequest,
    CloneRequest,
    CreateExportRequest,
    DatasetCreate,
    DeleteClassesRequest,
    ImageIdsRequest,
    IngestRequest,
    MergeClassesRequest,
    RedistributeRequest,
    RestoreRequest,
    SignedUrlRequest,
    TrashRequest,
    UpdateExportRequest,
    UploadCompleteRequest,
    dataset_item,
    image_item,
)
from lanner.db import iso, utcnow
from lanner.deps import Ctx, DbSession
from lanner.errors import BadRequest, Conflict, NotFound, NotImplementedOnSelfHosted
from lanner.projects.schemas import REGION
from lanner.slugs import renamed_slug
from lanner.storage.models import UploadSession

router = APIRouter(tags=["datasets"])
log = logging.getLogger("lanner.datasets")

SORTS = {"name": (DatasetItem.name, False), "-name": (DatasetItem.name, True),
         "newest": (DatasetItem.id, True), "oldest": (DatasetItem.id, False),
         "labels": (DatasetItem.label_count, False), "-labels": (DatasetItem.label_count, True)}
DATASET_UPLOAD_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".ndjson")


def _view(session: Session, dataset: Dataset, owner: str, *, versions: bool = False) -> dict[str, Any]:
    stats = service.counts(session, dataset.manifest_id)
    return dataset_item(dataset, owner=owner, stats=stats, size=service.total_bytes(session, dataset.manifest_id),
                        versions=service.list_versions(session, dataset) if versions else None)


# --- datasets ------------------------------------------------------------------------------------

@router.post("/api/datasets", status_code=201)
def create_dataset(body: DatasetCreate, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    dataset = service.create_dataset(
        session, principal, name=body.name, slug=body.dataset, owner=body.owner, description=body.description,
        visibility=body.visibility, task=body.task, class_names=body.classNames, tags=body.tags,
        license=body.license, metadata=body.metadata)
    return {"id": dataset.id, "owner": principal.username, "dataset": dataset.slug, "region": REGION}


@router.get("/api/datasets/{owner}")
def list_datasets(owner: str, principal: CurrentPrincipal, session: DbSession,
                  limit: int | None = Query(default=None, ge=1, le=1000)) -> dict[str, Any]:
    datasets = service.list_datasets(session, principal, owner=owner, limit=limit)
    items = [_view(session, d, owner.lower()) for d in datasets]
    return {"datasets": items, "total": len(items), "region": REGION}


@router.get("/api/datasets/{owner}/{dataset}")
def retrieve_dataset(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset)
    return {"dataset": {**_view(session, record, owner.lower(), versions=True), "metadata": record.metadata_ or {}}}


@router.patch("/api/datasets/{owner}/{dataset}")
def update_dataset(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession,
                   body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    if body.get("name"):
        record.slug = renamed_slug(
            body["name"], record.slug, what="dataset", where=f"{owner}/",
            taken=lambda slug: session.scalar(select(Dataset.id).where(
                Dataset.owner_id == record.owner_id, Dataset.slug == slug)) is not None)
        record.name = body["name"]
    if body.get("visibility") is not None:
        if body["visibility"] not in service.VISIBILITIES:
            raise BadRequest("visibility must be public or private")
        record.visibility = body["visibility"]
    if body.get("classNames") is not None:
        names = body["classNames"]
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise BadRequest("classNames must be a list of non-empty strings")
        if len(names) < len(record.class_names or []):
            raise BadRequest("classNames may rename or add classes; use classes/delete to remove classes")
        record.class_names = names
        service.touch(record)
    for key, attr in (("description", "description"), ("tags", "tags"), ("license", "license"),
                      ("metadata", "metadata_")):
        if body.get(key) is not None:
            setattr(record, attr, body[key])
    record.updated_at = utcnow()
    return {"success": True, "dataset": record.slug}


@router.delete("/api/datasets/{owner}/{dataset}")
def delete_dataset(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    service.trash_dataset(session, record)
    return {"success": True}


# --- upload and ingest ---------------------------------------------------------------------------

@router.post("/api/upload/signed-url")
def signed_url(body: SignedUrlRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx) -> dict[str, Any]:
    if body.assetType not in ("datasets", "models"):
        raise BadRequest("assetType must be 'datasets' or 'models'")
    filename = body.filename.replace("\\", "/").rsplit("/", 1)[-1]
    if body.assetType == "datasets" and not filename.lower().endswith(DATASET_UPLOAD_SUFFIXES):
        raise BadRequest("dataset uploads must be .zip, .tar, .tar.gz, .tgz or .ndjson: package images into an archive")
    if body.assetType == "models" and not filename.endswith(".pt"):
        raise BadRequest("model uploads must be .pt checkpoints")
    if body.totalBytes is not None and body.totalBytes > ctx.settings.max_upload_bytes:
        raise BadRequest(f"upload of {body.totalBytes} bytes exceeds the limit of {ctx.settings.max_upload_bytes}")
    if body.assetId and body.assetType == "datasets":
        target = session.get(Dataset, body.assetId)
        if target is None or target.owner_id != principal.user_id:
            raise NotFound("dataset not found")
    if body.assetId and body.assetType == "models":
        from lanner.projects.models import ModelRecord

        model = session.get(ModelRecord, body.assetId)
        if model is None or model.owner_id != principal.user_id:
            raise NotFound("model not found")
    upload = UploadSession(owner_id=principal.user_id, asset_type=body.assetType, asset_id=body.assetId,
                           filename=filename, content_type=body.contentType, total_bytes=body.totalBytes)
    session.add(upload)
    session.flush()
    ttl = 12 * 3600
    return {"sessionId": upload.id, "uploadUrl": ctx.signer.upload_url(f"sessions/{upload.id}/{filename}", ttl),
            "expiresAt": iso(utcnow().replace(microsecond=0) + timedelta(seconds=ttl)),
            "headers": {"Content-Type": "application/octet-stream"}}


def _owned_upload(session: Session, principal: Principal, session_id: str) -> UploadSession:
    upload = session.get(UploadSession, session_id)
    if upload is None or upload.owner_id != principal.user_id:
        raise NotFound("upload session not found")
    if upload.sha256 is None:
        raise Conflict("nothing was uploaded for this session yet: PUT the file to its uploadUrl first")
    return upload


@router.post("/api/upload/complete")
def upload_complete(body: UploadCompleteRequest, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    upload = _owned_upload(session, principal, body.sessionId)
    if upload.total_bytes is not None and upload.size != upload.total_bytes:
        raise BadRequest(f"uploaded {upload.size} bytes but {upload.total_bytes} were announced")
    if upload.status == "uploaded":
        upload.status = "completed"
    if upload.asset_type == "models" and upload.asset_id:
        attach_model_weights(session, principal, upload)
    return {"success": True, "file": {"size": float(upload.size or 0),
                                      **({"contentType": upload.content_type} if upload.content_type else {})}}


def attach_model_weights(session: Session, principal: Principal, upload: UploadSession) -> None:
    """``ul cloud train model=./my.pt`` creates a model, uploads the checkpoint with ``assetType: models`` and
    trains from ``ul://owner/project/model``: the upload becomes that model's weights."""
    from lanner.projects.models import ModelRecord

    model = session.get(ModelRecord, upload.asset_id)
    if model is None or model.owner_id != principal.user_id:
        raise NotFound("model not found for this upload")
    model.weights_sha256 = upload.sha256
    model.weights_size = upload.size
    model.weights_name = upload.filename
    if model.status == "untrained":
        model.status = "completed"  # an uploaded checkpoint is a trained model, ready to use or train from


def _run_ingest(ctx: AppContext, dataset_id: str, sha256: str, filename: str) -> None:
    """Background job: the API has already answered. Any failure lands on the dataset as processingError."""
    staging: Path | None = None
    try:
        work = ctx.settings.resolved_home / "tmp"
        work.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="upload-", dir=work))
        source = staging / filename
        ctx.blobs.copy_to(sha256, source)
        ingest_service.ingest_path(ctx, dataset_id, source)
    except Exception as exc:  # an import must end in ready or failed, never stay processing
        log.warning("import into dataset %s failed: %s", dataset_id, exc, exc_info=not isinstance(exc, ImportRefused))
        message = str(exc) if isinstance(exc, ImportRefused) else f"import failed: {exc}"
        with ctx.db.session() as session:
            dataset = session.get(Dataset, dataset_id)
            if dataset is not None:
                dataset.status = "failed"
                dataset.processing_error = {"message": message, "timestamp": iso(utcnow())}
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


@router.post("/api/datasets/{owner}/{dataset}/ingest", status_code=202)
def ingest(owner: str, dataset: str, body: IngestRequest, principal: CurrentPrincipal, session: DbSession,
           ctx: Ctx) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    upload = _owned_upload(session, principal, body.sessionId)
    if upload.asset_type != "datasets" or (upload.asset_id and upload.asset_id != record.id):
        raise BadRequest("this upload session is not for this dataset")
    if upload.status == "ingested":
        raise Conflict("this upload was already imported; upload the file again to import it again")
    if record.status == "processing":
        raise Conflict("this dataset is already processing an import")
    record.status, record.processing_error = "processing", None
    upload.status = "ingested"
    session.flush()
    session.commit()  # the job must see "processing" and the upload before it starts
    ctx.submit_job(_run_ingest, ctx, record.id, upload.sha256, upload.filename)
    return {"jobId": upload.id, "status": "queued"}


# --- images --------------------------------------------------------------------------------------

def _image_rows(session: Session, manifest_id: int):
    return (select(DatasetItem.key, DatasetItem.name, DatasetItem.split, DatasetItem.sha256, DatasetItem.labels,
                   DatasetItem.label_count, DatasetItem.issues, ImageBlob.width, ImageBlob.height,
                   ImageBlob.size, ImageBlob.thumb_sha256)
            .join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
            .where(DatasetItem.manifest_id == manifest_id))


def _error_count(session: Session, manifest_id: int) -> int:
    return int(session.scalar(select(func.count()).select_from(DatasetItem).where(
        DatasetItem.manifest_id == manifest_id, DatasetItem.issues != ",")) or 0)


@router.get("/api/datasets/{owner}/{dataset}/images")
def list_images(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
                limit: int = Query(default=50, ge=1, le=1000), offset: int = Query(default=0, ge=0),
                cursor: str | None = None, includeTotal: bool = True,
                split: str | None = None, hasError: bool | None = None, hasLabel: bool | None = None,
                classIds: str | None = None, search: str | None = None, q: str | None = None,
                issue: str | None = Query(default=None, description="Lanner: only images with this health issue"),
                sort: str = "name", includeThumbnails: bool = True, includeImageUrls: bool = False,
                includeLabels: bool = False) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset)
    # Filters and paging touch dataset_items only (its indexes cover them); image facts are joined for the
    # page's rows alone, so page 500 costs about what page 1 does.
    conditions = [DatasetItem.manifest_id == record.manifest_id]
    if split:
        if split not in ("train", "val", "test"):
            raise BadRequest("split must be train, val or test")
        conditions.append(DatasetItem.split == split)
    if hasLabel is not None:
        labeled = (DatasetItem.label_count > 0) | DatasetItem.class_id.is_not(None)
        conditions.append(labeled if hasLabel else ~labeled)
    if hasError is not None:
        conditions.append(DatasetItem.issues != "," if hasError else DatasetItem.issues == ",")
    if issue:
        conditions.append(DatasetItem.issues.like(f"%,{issue},%"))
    if classIds:
        try:
            ids = [int(x) for x in classIds.split(",") if x.strip()]
        except ValueError:
            raise BadRequest("classIds must be comma-separated integers") from None
        if ids and all(0 <= i < service.MASK_CLASSES for i in ids):
            conditions.append(DatasetItem.class_mask.op("&")(service.class_mask(ids)) != 0)
        else:
            conditions.append(or_(*[DatasetItem.class_list.like(f"%,{i},%") for i in ids]))
    text = search or q
    if text:
        conditions.append(DatasetItem.name.like(f"%{text}%"))
    if sort not in SORTS:
        raise BadRequest(f"sort must be one of {', '.join(SORTS)}")
    column, descending = SORTS[sort]
    if cursor:
        if not cursor.isdigit():
            raise BadRequest("cursor must come from nextCursor")
        offset = int(cursor)
    total = None
    if includeTotal:
        total = session.scalar(select(func.count()).select_from(DatasetItem).where(*conditions))
    order = [column.desc() if descending else column.asc(), DatasetItem.key]
    page = select(DatasetItem.id).where(*conditions).order_by(*order).offset(offset).limit(limit + 1)
    rows = session.execute(_image_rows(session, record.manifest_id).where(DatasetItem.id.in_(page.scalar_subquery()))
                           .order_by(*order)).all()
    has_more = len(rows) > limit
    images = [image_item(ctx, record.id, r, thumbnails=includeThumbnails, urls=includeImageUrls,
                         labels=includeLabels) for r in rows[:limit]]
    body: dict[str, Any] = {"images": images, "hasMore": has_more, "classes": list(record.class_names or []),
                            "errorCount": _error_count(session, record.manifest_id)}
    if total is not None:
        body["total"] = int(total)
    if has_more:
        body["nextCursor"] = str(offset + limit)
    return body


@router.post("/api/datasets/{owner}/{dataset}/images")
def selected_images(owner: str, dataset: str, body: ImageIdsRequest, principal: CurrentPrincipal,
                    session: DbSession, ctx: Ctx, includeThumbnails: bool = True, includeImageUrls: bool = False,
                    includeLabels: bool = False) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset)
    keys = [service.split_image_id(i)[1] for i in body.imageIds if i.startswith(record.id + "-")]
    rows = session.execute(_image_rows(session, record.manifest_id).where(DatasetItem.key.in_(keys))
                           .order_by(DatasetItem.name)).all()
    images = [image_item(ctx, record.id, r, thumbnails=includeThumbnails, urls=includeImageUrls,
                         labels=includeLabels) for r in rows]
    return {"images": images, "total": len(images), "hasMore": False, "classes": list(record.class_names or []),
            "errorCount": _error_count(session, record.manifest_id)}


@router.get("/api/images/{image_id}")
def retrieve_image(image_id: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    dataset, item = service.resolve_image(session, principal, image_id)
    blob = session.get(ImageBlob, item.sha256)
    assert blob is not None
    retained = session.scalar(select(func.count()).select_from(DatasetItem).where(
        DatasetItem.key == item.key, DatasetItem.manifest_id != dataset.manifest_id,
        DatasetItem.manifest_id.in_(select(DatasetVersion.manifest_id).where(
            DatasetVersion.dataset_id == dataset.id)))) or 0
    properties = {
        "id": image_id, "datasetId": dataset.id, "filename": item.name, "hash": item.sha256,
        "extension": item.name.rsplit(".", 1)[-1].lower(), "width": blob.width, "height": blob.height,
        "split": item.split, "annotationCount": item.label_count,
        "classIds": [int(c) for c in item.class_list.strip(",").split(",") if c], "bytes": blob.size,
        "region": REGION, "retainedByVersion": bool(retained), "createdAt": iso(item.updated_at),
        "updatedAt": iso(item.updated_at), "error": item.issues.strip(",").replace(",", ", ") or None,
    }
    return {"metadata": {}, "properties": properties, "labels": list(item.labels or []),
            "classNames": list(dataset.class_names or [])}


@router.delete("/api/images/bulk")
def delete_images_bulk(principal: CurrentPrincipal, session: DbSession,
                       body: ImageIdsRequest = Body(...)) -> dict[str, Any]:
    deleted: list[str] = []
    for dataset_id, keys in _group_ids(body.imageIds).items():
        dataset = service.get_dataset_by_id(session, principal, dataset_id, write=True)
        deleted += [f"{dataset_id}-{k}" for k in service.delete_items(session, dataset, keys)]
    return {"success": True, "deletedCount": len(deleted), "deletedImageIds": deleted}


@router.patch("/api/images/bulk")
def update_images_bulk(body: BulkSplitRequest, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    modified = skipped = 0
    for dataset_id, keys in _group_ids(body.imageIds).items():
        dataset = service.get_dataset_by_id(session, principal, dataset_id, write=True)
        m, s = service.move_items(session, dataset, keys, body.split)
        modified, skipped = modified + m, skipped + s
    return {"success": True, "modifiedCount": modified, "skippedCount": skipped, "targetSplit": body.split}


@router.patch("/api/images/{image_id}")
def update_image(image_id: str, principal: CurrentPrincipal, session: DbSession,
                 body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    dataset, item = service.resolve_image(session, principal, image_id, write=True)
    if "labels" in body:
        labels = service.validate_labels(dataset, body["labels"])
        service.set_labels(session, dataset, item, labels)
        return {"success": True, "labels": labels, "labelCount": len(labels)}
    if "metadata" in body:
        raise NotImplementedOnSelfHosted("custom image metadata is not stored by Lanner yet")
    raise BadRequest("send {labels: [...]} to replace an image's labels")


@router.delete("/api/images/{image_id}")
def delete_image(image_id: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    dataset, item = service.resolve_image(session, principal, image_id, write=True)
    deleted = service.delete_items(session, dataset, [item.key])
    return {"success": True, "deletedImageId": image_id, "deletedCount": len(deleted)}


def _group_ids(ids: list[str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for value in ids:
        dataset_id, key = service.split_image_id(value)
        grouped.setdefault(dataset_id, []).append(key)
    return grouped


@router.post("/api/images/urls")
def image_urls(body: ImageIdsRequest, principal: CurrentPrincipal, session: DbSession, ctx: Ctx) -> dict[str, Any]:
    urls, thumbnails = {}, {}
    for dataset_id, keys in _group_ids(body.imageIds).items():
        dataset = service.get_dataset_by_id(session, principal, dataset_id)
        for row in session.execute(_image_rows(session, dataset.manifest_id).where(DatasetItem.key.in_(keys))):
            image_id = f"{dataset_id}-{row.key}"
            urls[image_id] = ctx.signer.download_url(row.sha256, row.name)
            if row.thumb_sha256:
                thumbnails[image_id] = ctx.signer.download_url(row.thumb_sha256, "thumb.jpg")
    return {"urls": urls, "thumbnails": thumbnails, "depths": {}}


# --- classes, splits, stats, health --------------------------------------------------------------

@router.get("/api/datasets/{owner}/{dataset}/class-stats")
def class_stats(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    from lanner.datasets.stats import class_stats as compute

    record = service.get_dataset(session, principal, owner=owner, slug=dataset)
    return compute(session, record)


@router.post("/api/datasets/{owner}/{dataset}/classes/merge")
def merge_classes(owner: str, dataset: str, body: MergeClassesRequest, principal: CurrentPrincipal,
                  session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    target_name = (record.class_names or [])[body.targetClassId] if 0 <= body.targetClassId < len(
        record.class_names or []) else None
    merged = service.merge_classes(session, record, body.sourceClassIds, body.targetClassId)
    names = list(record.class_names or [])
    return {"success": True, "classNames": names, "classColors": {}, "mergedClassIds": merged,
            "targetClassId": names.index(target_name) if target_name in names else body.targetClassId}


@router.post("/api/datasets/{owner}/{dataset}/classes/delete")
def delete_classes(owner: str, dataset: str, body: DeleteClassesRequest, principal: CurrentPrincipal,
                   session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    deleted, dropped = service.delete_classes(session, record, body.classIds)
    return {"success": True, "classNames": list(record.class_names or []), "classColors": {},
            "deletedClassIds": deleted, "deletedAnnotations": dropped}


@router.post("/api/datasets/{owner}/{dataset}/splits/redistribute")
def redistribute(owner: str, dataset: str, body: RedistributeRequest, principal: CurrentPrincipal,
                 session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    splits, modified = service.redistribute(session, record, {"train": body.train, "val": body.val,
                                                              "test": body.test}, seed=body.seed)
    return {"success": True, "splits": splits, "modified": modified}


@router.get("/api/datasets/{owner}/{dataset}/health", tags=["lanner"],
            summary="Health report (Lanner extension)",
            description="Corrupt images, exact and near duplicates, unlabelled images, boxes outside the image or "
                        "of near-zero area, tiny objects, size outliers, train/val leakage and class imbalance. "
                        "`issues` counts images per issue code; filter the image list with `issue=<code>`.")
def dataset_health(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset)
    summary = record.health
    if summary is None or record.health_revision != record.revision:
        summary = ingest_service.refresh_health(session, record)
    return {"dataset": record.slug, "revision": record.revision, **summary}


# --- clone, versions, export ---------------------------------------------------------------------

@router.post("/api/datasets/{owner}/{dataset}/clone", status_code=201)
def clone(owner: str, dataset: str, body: CloneRequest, principal: CurrentPrincipal,
          session: DbSession) -> dict[str, Any]:
    source = service.get_dataset(session, principal, owner=owner, slug=dataset)
    if body.owner and body.owner.lower() != principal.username:
        raise NotFound(f"workspace '{body.owner}' not found")
    copy = service.clone_dataset(session, principal, source, name=body.name, slug=body.dataset,
                                 description=body.description, visibility=body.visibility)
    if body.version is not None:
        version = service.get_version(session, source, body.version)
        copy.manifest_id, copy.class_names, copy.task = version.manifest_id, list(version.class_names), version.task
    session.flush()
    stats = service.counts(session, copy.manifest_id)
    return {"id": copy.id, "owner": principal.username, "dataset": copy.slug, "name": copy.name,
            "imageCount": stats["images"], "classCount": len(copy.class_names or []), "region": REGION}


def _export_response(ctx: AppContext, sha256: str, filename: str) -> str:
    return ctx.signer.download_url(sha256, filename)


def _captured_version(session: Any, principal: Any, record: Any) -> Any:
    """A worker of a run that captured a version of this dataset trains on that version, at its first launch
    and at every relaunch, whatever happened to the live dataset since: the trainer asks for ``ul://`` data
    without a version, so the run's key decides."""
    if principal.run_id is None:
        return None
    from lanner.datasets.models import DatasetVersion
    from lanner.training.models import Run

    run = session.get(Run, principal.run_id)
    if run is None or not run.dataset_version_id:
        return None
    version = session.get(DatasetVersion, int(run.dataset_version_id))
    return version if version is not None and version.dataset_id == record.id else None


@router.get("/api/datasets/{owner}/{dataset}/export")
def export(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession, ctx: Ctx,
           v: int | None = None,
           format: str = Query(default="ndjson", description="Lanner: ndjson, yolo (zip) or coco (JSON)"),
           ) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset)
    captured = _captured_version(session, principal, record) if v is None else None
    if record.status == "processing" and captured is None:
        raise Conflict("the dataset is still processing an import; try again when it is ready")
    if v is not None or captured is not None:
        version = captured or service.get_version(session, record, v or 0)
        sha, name, _ = exports.build_export(ctx, session, record, kind=format, manifest_id=version.manifest_id,
                                            class_names=list(version.class_names), task=version.task,
                                            revision=-version.version, owner=owner.lower())
        return {"downloadUrl": _export_response(ctx, sha, name), "version": version.version}
    sha, name, cached = exports.build_export(ctx, session, record, kind=format, owner=owner.lower())
    return {"downloadUrl": _export_response(ctx, sha, name), "cached": cached}


@router.post("/api/datasets/{owner}/{dataset}/export")
def create_version(owner: str, dataset: str, body: CreateExportRequest, principal: CurrentPrincipal,
                   session: DbSession, ctx: Ctx) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    version, reused = service.create_version(session, record, body.description)
    response: dict[str, Any] = {"version": version.version, "reused": reused}
    if body.download:
        sha, name, _ = exports.build_export(ctx, session, record, manifest_id=version.manifest_id,
                                            class_names=list(version.class_names), task=version.task,
                                            revision=-version.version, owner=owner.lower())
        response["downloadUrl"] = _export_response(ctx, sha, name)
    return response


@router.patch("/api/datasets/{owner}/{dataset}/export")
def describe_version(owner: str, dataset: str, body: UpdateExportRequest, principal: CurrentPrincipal,
                     session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    service.get_version(session, record, body.version).description = body.description
    return {"ok": True}


@router.post("/api/datasets/{owner}/{dataset}/restore")
def restore(owner: str, dataset: str, body: RestoreRequest, principal: CurrentPrincipal,
            session: DbSession) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset, write=True)
    version = service.restore_version(session, record, body.version)
    return {"version": version.version, "imageCount": service.counts(session, record.manifest_id)["images"]}


@router.get("/api/datasets/{owner}/{dataset}/versions/compare")
def compare(owner: str, dataset: str, principal: CurrentPrincipal, session: DbSession,
            base: int = Query(..., ge=0, description="version number; 0 = the current, unversioned content"),
            head: int = Query(default=0, ge=0), cursor: str | None = None) -> dict[str, Any]:
    record = service.get_dataset(session, principal, owner=owner, slug=dataset)

    def manifest(number: int) -> tuple[int, list[str]]:
        if number == 0:
            return record.manifest_id, list(record.class_names or [])
        version = service.get_version(session, record, number)
        return version.manifest_id, list(version.class_names)

    (base_manifest, base_names), (head_manifest, head_names) = manifest(base), manifest(head)
    items = service.compare_manifests(session, base_manifest, head_manifest)
    start = int(cursor) if cursor and cursor.isdigit() else 0
    page = items[start:start + 500]
    summary = {
        "added": sum(i["change"] == "added" for i in items), "removed": sum(i["change"] == "removed" for i in items),
        "modified": sum(i["change"] == "modified" for i in items), "moved": sum(i["change"] == "moved" for i in items),
        "labelsAdded": sum(i["labelsAdded"] for i in items), "labelsRemoved": sum(i["labelsRemoved"] for i in items),
        "header": {"classesAdded": [n for n in head_names if n not in base_names],
                   "classesRemoved": [n for n in base_names if n not in head_names], "classesRenamed": [],
                   "changed": ["classNames"] if base_names != head_names else []},
    }
    body: dict[str, Any] = {"summary": summary, "items": page}
    if start + 500 < len(items):
        body["nextCursor"] = str(start + 500)
    return body


# --- trash and explore ---------------------------------------------------------------------------

@router.get("/api/trash")
def trash(principal: CurrentPrincipal, session: DbSession, page: int = Query(default=1, ge=1),
          limit: int = Query(default=20, ge=1, le=100), type: str | None = None, id: str | None = None,
          ) -> dict[str, Any]:
    items = [] if type not in (None, "dataset") else service.trashed(session, principal)
    if id:
        items = [d for d in items if d.id == id]
    now = utcnow()
    rows = []
    total_bytes = 0
    for dataset in items:
        size = service.total_bytes(session, dataset.manifest_id)
        total_bytes += size
        assert dataset.deleted_at is not None
        remaining = service.TRASH_DAYS - (now - dataset.deleted_at).days
        rows.append({"_id": dataset.id, "type": "dataset", "name": dataset.name, "slug": dataset.slug,
                     "trashedAt": iso(dataset.deleted_at), "daysRemaining": max(0, remaining),
                     "sizeBytes": float(size)})
    start = (page - 1) * limit
    return {
        "items": rows[start:start + limit], "total": len(rows), "page": page, "limit": limit,
        "totalPages": max(1, -(-len(rows) // limit)),
        "summary": {"totalItems": len(rows), "totalSizeBytes": float(total_bytes), "byType": {
            "projects": {"count": 0}, "datasets": {"count": len(rows), "sizeBytes": float(total_bytes)},
            "models": {"count": 0, "sizeBytes": 0.0}, "exports": {"count": 0, "sizeBytes": 0.0}}},
        "region": REGION,
    }


def _trashed_dataset(session: Session, principal: Principal, dataset_id: str) -> Dataset:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None or dataset.owner_id != principal.user_id or dataset.deleted_at is None:
        raise NotFound("no such item in the trash")
    return dataset


@router.post("/api/trash")
def restore_from_trash(body: TrashRequest, principal: CurrentPrincipal, session: DbSession) -> dict[str, Any]:
    if body.type != "dataset":
        raise NotImplementedOnSelfHosted("only datasets go to the trash in Lanner; projects and models are deleted")
    service.restore_dataset(session, _trashed_dataset(session, principal, body.id))
    return {"success": True}


@router.delete("/api/trash")
def empty_trash(principal: CurrentPrincipal, session: DbSession,
                body: dict[str, Any] = Body(default_factory=dict)) -> dict[str, Any]:
    """Body ``{id, type}`` deletes one item for good; ``{all: true}`` empties the trash."""
    if body.get("id"):
        if body.get("type", "dataset") != "dataset":
            raise NotImplementedOnSelfHosted("only datasets go to the trash in Lanner")
        items = [_trashed_dataset(session, principal, str(body["id"]))]
    elif body.get("all") is True:
        items = service.trashed(session, principal)
    else:
        raise BadRequest("send {id, type} to delete one item or {all: true} to empty the trash")
    for dataset in items:
        service.purge_dataset(session, dataset)
    return {"success": True, "deletedCount": len(items)}


@router.get("/api/explore/search")
def explore(principal: CurrentPrincipal, session: DbSession, ctx: Ctx, q: str | None = None,
            type: str | None = None, task: str | None = None, offset: int = Query(default=0, ge=0),
            limit: int = Query(default=20, ge=1, le=100), sort: str | None = None) -> dict[str, Any]:
    datasets = [] if type not in (None, "datasets", "dataset") else service.search_public(
        session, q=q, task=task, limit=limit + 1, offset=offset)
    items = []
    for d in datasets[:limit]:
        stats = service.counts(session, d.manifest_id)
        items.append({"id": d.id, "dataset": d.slug, "name": d.name, "description": d.description or "",
                      "owner": service.owner_name(session, d), "visibility": d.visibility,
                      "imageCount": stats["images"], "classCount": len(d.class_names or []),
                      "classNames": list(d.class_names or []), "task": d.task, "tags": list(d.tags or []),
                      "splits": {k: stats[k] for k in ("train", "val", "test", "labeled")}, "starCount": 0,
                      "sampleImages": [], "updatedAt": iso(d.updated_at)})
    return {"projects": [], "datasets": items, "hasMore": len(datasets) > limit}


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
for method, suffix, message in (
        ("GET", "embeddings", "image embeddings are not built by Lanner yet"),
        ("POST", "embeddings", "image embeddings are not built by Lanner yet"),
        ("DELETE", "embeddings", "image embeddings are not built by Lanner yet"),
        ("GET", "images/clustering", "embedding clustering is not built by Lanner yet"),
        ("POST", "images/adopt", "adopting images from another dataset is not supported yet; clone the dataset"),
        ("GET", "predict/batch", "batch prediction on datasets is not available yet"),
        ("POST", "predict/batch", "batch prediction on datasets is not available yet"),
        ("DELETE", "predict/batch", "batch prediction on datasets is not available yet"),
        ("GET", "models", "listing models trained on a dataset is not available yet")):
    router.add_api_route(f"/api/datasets/{{owner}}/{{dataset}}/{suffix}", _not_implemented(message),
                         methods=[method], summary="Not available on self-hosted Lanner (501)")
