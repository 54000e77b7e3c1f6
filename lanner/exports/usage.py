"""What a workspace stores (``account.storage``): the bytes of its datasets, models and exports, per kind, with
the largest items. Here because exports is the lowest layer that sees all three.

- a dataset: its current images (``datasets.service.dataset_bytes``), trashed ones included (they hold their
  bytes until purged), except the pixels of images imported in place from a bucket: those stay in the user's
  bucket (``integrations.pixels.bucket_bytes``), and the SDK's shape has no field for bytes held elsewhere;
- a model: its weights and the checkpoints its runs uploaded (each digest once);
- an export: its artefact.

Blobs are content-addressed, so two items holding the same bytes are each counted in full: this is what each
item would free if it went alone, not the disk the server uses. Lanner has no storage plans: every ``limit`` is
0 (none) and ``percent`` 0."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset
from lanner.db import iso, utcnow
from lanner.exports.models import ModelExport
from lanner.integrations import pixels as bucket_pixels
from lanner.projects.models import ModelRecord, Project
from lanner.projects.schemas import REGION
from lanner.training.models import StagedUpload

TOP_ITEMS = 10
NO_LIMIT = {"limit": 0.0, "percent": 0.0}


def _model_bytes(session: Session, owner_id: str) -> list[dict[str, Any]]:
    rows = session.execute(select(ModelRecord.id, ModelRecord.slug, ModelRecord.name, ModelRecord.weights_sha256,
                                  ModelRecord.weights_size, Project.name, Project.slug)
                           .join(Project, Project.id == ModelRecord.project_id)
                           .where(ModelRecord.owner_id == owner_id)).all()
    blobs: dict[str, dict[str, int]] = {row[0]: {} for row in rows}
    for model_id, digest, size in session.execute(select(StagedUpload.model_id, StagedUpload.sha256,
                                                         StagedUpload.size).where(
            StagedUpload.model_id.in_(blobs), StagedUpload.sha256.is_not(None))):
        blobs[model_id][digest] = int(size or 0)
    items = []
    for model_id, slug, name, digest, size, project_name, project_slug in rows:
        if digest:
            blobs[model_id][digest] = int(size or 0)
        items.append({"_id": model_id, "name": name, "slug": slug, "sizeBytes": float(sum(blobs[model_id].values())),
                      "type": "model", "parentName": project_name, "parentSlug": project_slug})
    return items


def _export_bytes(session: Session, owner_id: str) -> list[dict[str, Any]]:
    rows = session.execute(select(ModelExport.id, ModelExport.filename, ModelExport.size, ModelRecord.name,
                                  ModelRecord.slug).join(ModelRecord, ModelRecord.id == ModelExport.model_id)
                           .where(ModelExport.owner_id == owner_id, ModelExport.sha256.is_not(None)))
    return [{"_id": export_id, "name": filename, "sizeBytes": float(size or 0), "type": "export",
             "parentName": model_name, "parentSlug": model_slug}
            for export_id, filename, size, model_name, model_slug in rows]


def storage(session: Session, owner: User, *, details: bool) -> dict[str, Any]:
    """``account.storage`` of workspace ``owner`` (the caller's own, or a team's), in the SDK's shape."""
    datasets = [{"_id": d.id, "name": d.name, "slug": d.slug, "sizeBytes": float(
        datasets_service.dataset_bytes(session, d) - bucket_pixels.bucket_bytes(session, d)), "type": "dataset"}
        for d in session.scalars(select(Dataset).where(Dataset.owner_id == owner.id))]
    models = _model_bytes(session, owner.id)
    exports = _export_bytes(session, owner.id)
    by_kind = {kind: {"bytes": float(sum(i["sizeBytes"] for i in items)), "count": float(len(items))}
               for kind, items in (("datasets", datasets), ("models", models), ("exports", exports))}
    total = sum(kind["bytes"] for kind in by_kind.values())
    top = sorted(datasets + models + exports, key=lambda i: -i["sizeBytes"])[:TOP_ITEMS] if details else []
    return {"tier": owner.tier, "username": owner.username, "region": REGION, "updatedAt": iso(utcnow()),
            "usage": {"storage": {"current": total, **NO_LIMIT},
                      "datasets": {"current": float(len(datasets)), **NO_LIMIT},
                      "models": {"current": float(len(models)), **NO_LIMIT},
                      "projects": {"current": float(session.scalar(select(func.count()).select_from(Project).where(
                          Project.owner_id == owner.id)) or 0), **NO_LIMIT}},
            "breakdown": {"byCategory": by_kind, "topItems": top}}
