"""Wire shapes for datasets and images, as ``ultralytics_platform/types.py`` declares them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from lanner.bounds import TEXT_MAX_CHARS, BigCount, Count, FiniteFloat, RowId, StoredJson
from lanner.datasets.models import Dataset, DatasetVersion
from lanner.db import iso
from lanner.projects.schemas import REGION
from lanner.resources import OwnedResourceCreate, OwnedResourceUpdate
from lanner.storage.signing import URLSigner

SDK_TASKS = ("detect", "segment", "semantic", "depth", "classify", "pose", "obb")


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def splits_of(stats: dict[str, int]) -> dict[str, int]:
    return {"train": stats.get("train", 0), "val": stats.get("val", 0), "test": stats.get("test", 0),
            "labeled": stats.get("labeled", 0)}


def version_item(version: DatasetVersion) -> dict[str, Any]:
    stats = version.stats or {}
    return {"version": version.version, "description": version.description or "",
            "sizeBytes": float(stats.get("bytes", 0)), "contentHash": version.content_hash,
            "imageCount": stats.get("images", 0), "classCount": len(version.class_names or []),
            "annotationCount": stats.get("annotations", 0), "splits": splits_of(stats),
            "createdAt": iso(version.created_at)}


def dataset_item(dataset: Dataset, *, owner: str, stats: dict[str, int], size: int,
                 versions: list[DatasetVersion] | None = None) -> dict[str, Any]:
    last = dataset.last_ingest or {}
    body: dict[str, Any] = {
        "id": dataset.id,
        "owner": owner,
        "dataset": dataset.slug,
        "name": dataset.name,
        "description": dataset.description or "",
        "visibility": dataset.visibility,
        "task": dataset.task if dataset.task in SDK_TASKS else "detect",
        "imageCount": stats.get("images", 0),
        "classCount": len(dataset.class_names or []),
        "classNames": [str(n) for n in dataset.class_names or []],
        "format": dataset.format,
        "tags": list(dataset.tags or []),
        "license": dataset.license,
        "splits": splits_of(stats),
        "annotationCount": stats.get("annotations", 0),
        "totalBytes": float(size),
        "starCount": 0,  # nothing is starred in Lanner
        "isStarred": False,
        "status": dataset.status,
        "source": {"provider": "local"},
        "kptShape": list(dataset.kpt_shape) if dataset.kpt_shape else None,
        "processingTimeMs": float(last["processingTimeMs"]) if "processingTimeMs" in last else None,
        "processingError": dataset.processing_error,
        "lastIngestSummary": {"added": int(last.get("added", 0)), "errors": int(last.get("errors", 0)),
                              "skippedCounts": {k: int(v) for k, v in (last.get("skippedCounts") or {}).items()}}
        if last else None,
        "errorCount": int(dataset.health.get("images_with_issues", 0)) if dataset.health else None,
        "clonedFrom": dataset.cloned_from_id,
        "region": REGION,
        "versions": [version_item(v) for v in versions] if versions is not None else None,
        "createdAt": iso(dataset.created_at),
        "updatedAt": iso(dataset.updated_at),
    }
    return _drop_none(body)


def image_items(signer: URLSigner, dataset_id: str, rows: Iterable[Any], *, thumbnails: bool = True,
                urls: bool = False, labels: bool = False) -> list[dict[str, Any]]:
    """``rows`` carry key, name, split, sha256, labels, label_count, issues, width, height, size, thumb_sha256.
    The links of a page are signed with one expiry (``URLSigner.blob_links``), the digests they name asked
    about at once."""
    rows = list(rows)
    digests = [row.thumb_sha256 for row in rows if thumbnails and row.thumb_sha256]
    digests += [row.sha256 for row in rows] if urls else []
    link = signer.blob_links(digests=digests) if thumbnails or urls else None
    prefix = f"{dataset_id}-"
    items = []
    for row in rows:
        name, issues = row.name, row.issues
        item: dict[str, Any] = {
            "id": prefix + row.key,
            "hash": row.sha256,
            "ext": name.rsplit(".", 1)[-1].lower() if "." in name else "",
            "width": int(row.width),
            "height": int(row.height),
            "split": row.split,
            "labelCount": int(row.label_count),
            "name": name,
            "bytes": int(row.size),
            "error": (issues.strip(",").replace(",", ", ") or None) if issues else None,
        }
        if thumbnails and row.thumb_sha256:
            item["thumbnailUrl"] = link(row.thumb_sha256, "thumb.jpg")  # type: ignore[misc]
        if urls:
            item["imageUrl"] = link(row.sha256, name)  # type: ignore[misc]
        if labels:
            item["labels"] = list(row.labels or [])
        items.append(item)
    return items


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


ClassNames = Annotated[list[str], StoredJson]


class DatasetCreate(OwnedResourceCreate):
    dataset: str | None = Field(default=None, max_length=128)
    task: str | None = Field(default=None, max_length=20)
    classNames: ClassNames | None = None


class DatasetUpdate(OwnedResourceUpdate):
    classNames: ClassNames | None = None


class IngestRequest(_Body):
    sessionId: str = Field(min_length=1)


class CloneRequest(_Body):
    name: str | None = Field(default=None, max_length=200)
    dataset: str | None = Field(default=None, max_length=128)
    description: str | None = Field(default=None, max_length=TEXT_MAX_CHARS)
    visibility: str = "private"
    owner: str | None = Field(default=None, max_length=64)
    version: RowId | None = None


class MergeClassesRequest(_Body):
    sourceClassIds: list[Count] = Field(min_length=1, max_length=10_000)
    targetClassId: Count


class DeleteClassesRequest(_Body):
    classIds: list[Count] = Field(min_length=1, max_length=10_000)


class RedistributeRequest(_Body):
    train: FiniteFloat = Field(ge=0)
    val: FiniteFloat = Field(ge=0)
    test: FiniteFloat = Field(default=0, ge=0)
    seed: BigCount = 0


class CreateExportRequest(_Body):
    description: str = Field(default="", max_length=TEXT_MAX_CHARS)
    download: bool = False


class UpdateExportRequest(_Body):
    version: RowId
    description: str = Field(default="", max_length=TEXT_MAX_CHARS)


class RestoreRequest(_Body):
    version: RowId


class ImageIdsRequest(_Body):
    imageIds: list[str] = Field(min_length=1, max_length=10_000)


class AdoptImagesRequest(_Body):
    """``datasets.adopt_images`` (``datasets/adopt.py``): ``release`` and ``classMapping`` keep the labels."""

    imageIds: list[Annotated[str, Field(max_length=100)]] = Field(min_length=1, max_length=10_000)
    release: bool | None = None
    classMapping: dict[Annotated[str, Field(max_length=200)], Annotated[str, Field(min_length=1, max_length=200)]] \
        | None = Field(default=None, max_length=1000)


class BulkSplitRequest(_Body):
    imageIds: list[str] = Field(min_length=1, max_length=10_000)
    split: str


class TrashRequest(_Body):
    id: str
    type: str


class EmptyTrashRequest(_Body):
    """``{id, type}`` deletes one item for good; ``{all: true}`` empties the trash (``trash.empty``)."""

    id: str | None = None
    type: str | None = None
    all: bool | None = None
