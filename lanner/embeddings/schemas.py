"""The embeddings' answers in the SDK's shapes (``ultralytics_platform.types``): ``DatasetsEmbeddingsResponse``'s
``activeJob`` and the items of ``ImagesFindSimilarImagesResponse`` / ``ModelsFindSimilarTrainingImagesResponse``.
The SDK's requests carry no body; ``CreateEmbeddings`` is Lanner's optional one (the SDK's call sends none)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lanner.db import iso
from lanner.embeddings import jobs
from lanner.embeddings.models import EmbeddingJob

LICENSES = {"None", "CC0-1.0", "PDM-1.0", "CC-BY-2.5", "CC-BY-3.0", "CC-BY-4.0", "CC-BY-NC-2.0", "CC-BY-NC-3.0",
            "CC-BY-NC-4.0", "CC-BY-SA-3.0", "CC-BY-SA-4.0", "CC-BY-NC-SA-3.0", "CC-BY-NC-SA-4.0", "CC-BY-ND-4.0",
            "CC-BY-NC-ND-2.0", "CC-BY-NC-ND-4.0", "Apache-2.0", "MIT", "BSD-3-Clause", "AGPL-3.0", "GPL-2.0",
            "GPL-3.0", "LGPL-3.0", "ODbL-1.0", "DbCL-1.0", "Research-Only", "Other"}


class CreateEmbeddings(BaseModel):
    """``POST .../embeddings``' optional body: ``modelId``, a model id or ``ul://owner/project/model`` to embed
    with, or ``auto`` for the server's pick; left out, the dataset's model (the one last named, else the pick)."""

    model_config = ConfigDict(extra="forbid")
    modelId: str | None = Field(default=None, min_length=1, max_length=300)  # noqa: N815 (the wire's name)


def license_name(value: str | None) -> str:
    """The SDK's licence names: none is ``None``, one it does not list is ``Other``."""
    return "None" if not value else value if value in LICENSES else "Other"


def active_job(job: EmbeddingJob) -> dict[str, Any]:
    """The job under way; its progress once an attempt was launched (None while it waits for the first)."""
    progress = None
    if job.status != jobs.QUEUED or job.attempt:
        percent = 100.0 * job.processed / job.total if job.total else 0.0
        progress = {"stage": "embedding", "percent": round(min(percent, 100.0), 1), "processed": float(job.processed),
                    "total": float(job.total), "failedDownloads": float(job.failed_downloads),
                    "failedInference": float(job.failed_inference)}
    return {"id": job.id, "status": job.status, "progress": progress, "createdAt": iso(job.created_at)}


def similar_images(hits: list[Any], owners: dict[str, str], link: Callable[[str, str], str]) -> dict[str, Any]:
    """``hits``: (score, dataset, item row) best first; ``owners``: owner id -> workspace name; ``link``: signed
    blob links (``URLSigner.blob_links``)."""
    images = []
    for score, dataset, row in hits:
        image_url = link(row.sha256, row.name)
        images.append({"name": row.name, "hash": row.sha256, "width": int(row.width), "height": int(row.height),
                       "id": f"{dataset.id}-{row.key}",
                       "thumbnailUrl": link(row.thumb_sha256, "thumb.jpg") if row.thumb_sha256 else image_url,
                       "imageUrl": image_url,
                       "dataset": {"owner": owners[dataset.owner_id], "dataset": dataset.slug,
                                   "license": license_name(dataset.license)},
                       "score": round(score, 6)})
    return {"images": images}
