"""Datasets: access, create/update, copy-on-write manifests, counts, and freezing a version.

This is what other domains call (training resolves ``ul://`` datasets and captures versions through it).
Everything else a dataset does builds on this module: images (``items``, ``listing``), class and split edits
(``edits``), clones, restores and comparisons of versions (``versions``), the trash (``trash``), imports
(``ingest``, ``jobs``) and exports.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import case, delete, func, insert, literal, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from lanner.accounts import service as accounts_service
from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.datasets import state
from lanner.datasets.models import Dataset, DatasetItem, DatasetVersion, ImageBlob, Manifest
from lanner.datasets.records import TASKS, ImageInfo, Label
from lanner.datasets.schemas import dataset_item
from lanner.db import after_commit, iso, utcnow
from lanner.errors import BadRequest, Conflict, NotFound
from lanner.projects import service as projects_service
from lanner.resources import apply_changes, check_visibility
from lanner.slugs import slugify
from lanner.teams import permissions, transfers

# An item as a manifest copy carries it (clones, versions, the assistant's training data).
ITEM_COPY_COLUMNS = ("key", "name", "split", "sha256", "labels", "class_id", "label_count", "class_list",
                     "class_mask", "issues", "updated_at", "label_rev", "labelled_by", "labelled_at", "last_edit_id",
                     "metadata")


def new_key() -> str:
    return secrets.token_hex(6)


# --- access --------------------------------------------------------------------------------------

def get_dataset(session: Session, principal: Principal, *, owner: str, slug: str, write: bool = False,
                include_trashed: bool = False) -> Dataset:
    """404 for anything the caller may not see; 403 for writing a public dataset of someone else."""
    dataset = session.scalar(select(Dataset).join(User, User.id == Dataset.owner_id).where(
        User.username == owner.lower(), Dataset.slug == slug))
    if dataset is None:  # moved to another workspace: the old address still answers (lanner/teams/transfers.py)
        moved = transfers.moved_to(session, "dataset", owner, slug)
        dataset = session.get(Dataset, moved) if moved else None
    missing = f"dataset '{owner}/{slug}' not found"
    if dataset is None or (dataset.deleted_at is not None and not include_trashed):
        raise NotFound(missing)
    permissions.check(session, user_id=principal.user_id, owner_id=dataset.owner_id, visibility=dataset.visibility,
                      action="write" if write else "read", missing=missing,
                      read_only=f"dataset '{owner}/{slug}' is public but read-only for you")
    return dataset


def transfer_dataset(session: Session, principal: Principal, *, owner: str, slug: str,
                     to_owner: str) -> tuple[Dataset, str]:
    """Move the dataset to workspace ``to_owner``: the same row (id, versions, images, labels, runs that used it),
    a new owner; returns it and the new owner's name. Import history keeps the owner it ran for."""
    dataset = get_dataset(session, principal, owner=owner, slug=slug)
    _, new_owner = transfers.move(session, principal, dataset, kind="dataset", to_owner=to_owner, slug_taken=lambda
                                  owner_id, name: session.scalar(select(Dataset.id).where(
                                      Dataset.owner_id == owner_id, Dataset.slug == name)) is not None)
    return dataset, new_owner


def get_dataset_by_id(session: Session, principal: Principal, dataset_id: str, *, write: bool = False) -> Dataset:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None or dataset.deleted_at is not None:
        raise NotFound("image not found")
    permissions.check(session, user_id=principal.user_id, owner_id=dataset.owner_id, visibility=dataset.visibility,
                      action="write" if write else "read", missing="image not found",
                      read_only="this dataset is public but read-only for you")
    return dataset


def owner_name(session: Session, dataset: Dataset) -> str:
    return session.scalar(select(User.username).where(User.id == dataset.owner_id)) or ""


def list_datasets(session: Session, principal: Principal, *, owner: str, limit: int | None = None) -> list[Dataset]:
    """An unknown owner is answered like a known one with nothing public (an empty list): a 404 would tell
    anyone which usernames exist."""
    user = accounts_service.get_user_by_username(session, username=owner)
    if user is None:
        return []
    query = select(Dataset).where(Dataset.owner_id == user.id, Dataset.deleted_at.is_(None),
                                  Dataset.purpose.is_(None)).order_by(Dataset.created_at.desc())
    if not permissions.readable_owner(session, user_id=principal.user_id, owner_id=user.id):
        query = query.where(Dataset.visibility == "public")
    if limit:
        query = query.limit(limit)
    return list(session.scalars(query))


def list_versions(session: Session, dataset: Dataset) -> list[DatasetVersion]:
    return list(session.scalars(select(DatasetVersion).where(DatasetVersion.dataset_id == dataset.id)
                                .order_by(DatasetVersion.version)))


def dataset_view(session: Session, dataset: Dataset, *, owner: str, versions: bool = False) -> dict[str, Any]:
    """The dataset as ``datasets.list`` and ``datasets.retrieve`` show it: with its counts and size."""
    return dataset_item(dataset, owner=owner, stats=dataset_counts(session, dataset),
                        size=dataset_bytes(session, dataset),
                        versions=list_versions(session, dataset) if versions else None)


def create_dataset(session: Session, principal: Principal, *, name: str, slug: str | None = None,
                   owner: str | None = None, description: str = "", visibility: str = "private",
                   task: str | None = None, class_names: list[str] | None = None, tags: list[str] | None = None,
                   license: str | None = None, metadata: dict[str, Any] | None = None) -> Dataset:
    owner_id, owner_name = permissions.workspace_for(session, user_id=principal.user_id,
                                                     username=principal.username, owner=owner)
    check_visibility(visibility)
    if task is not None and task not in TASKS:
        raise BadRequest(f"task must be one of {', '.join(TASKS)}")
    slug = slugify(slug or name)
    if not slug:
        raise BadRequest("dataset name must contain at least one letter or digit")
    if session.scalar(select(Dataset.id).where(Dataset.owner_id == owner_id, Dataset.slug == slug)):
        raise Conflict(f"dataset '{owner_name}/{slug}' already exists")
    manifest = Manifest()
    session.add(manifest)
    session.flush()
    dataset = Dataset(owner_id=owner_id, slug=slug, name=name or slug, description=description or "",
                      visibility=visibility, task=task or "detect", class_names=list(class_names or []),
                      tags=list(tags or []), license=license, metadata_=metadata or {}, manifest_id=manifest.id)
    state.created(session, dataset)
    return dataset


def update_dataset(session: Session, principal: Principal, *, owner: str, slug: str,
                   changes: Mapping[str, Any]) -> Dataset:
    """``datasets.update``: the owned-resource fields, and ``classNames`` to rename or add classes."""
    dataset = get_dataset(session, principal, owner=owner, slug=slug, write=True)
    apply_changes(session, dataset, changes, what="dataset", where=f"{principal.username}/")
    names = changes.get("classNames")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise BadRequest("classNames must be a list of non-empty strings")
        if len(names) < len(dataset.class_names or []):
            raise BadRequest("classNames may rename or add classes; use classes/delete to remove classes")
        dataset.class_names = names
        touch(dataset)
    dataset.updated_at = utcnow()
    return dataset


def touch(dataset: Dataset) -> None:
    """Every content change bumps the revision: exports and health reports are keyed by it."""
    dataset.revision = (dataset.revision or 0) + 1
    dataset.updated_at = utcnow()


def explore(session: Session, *, q: str | None, type: str | None, task: str | None, limit: int,
            offset: int) -> dict[str, Any]:
    """``explore.search`` over public datasets and projects (``type``: ``all`` or none for both, ``datasets``,
    ``projects``; ``images`` finds nothing here). ``task``: comma-separated tasks (a project matches with a model
    of one of them). ``hasMore``: either list has more past this page."""
    tasks = [t.strip() for t in (task or "").split(",") if t.strip()]
    datasets: list[Dataset] = []
    if type in (None, "all", "datasets", "dataset"):
        query = select(Dataset).where(Dataset.visibility == "public", Dataset.deleted_at.is_(None))
        if q:
            pattern = f"%{q.lower()}%"
            query = query.where(or_(func.lower(Dataset.name).like(pattern), Dataset.slug.like(pattern),
                                    func.lower(Dataset.description).like(pattern)))
        if tasks:
            query = query.where(Dataset.task.in_(tasks))
        datasets = list(session.scalars(query.order_by(Dataset.updated_at.desc()).offset(offset).limit(limit + 1)))
    projects, more_projects = ([], False) if type not in (None, "all", "projects", "project") else (
        projects_service.search_public(session, q=q, tasks=tasks, limit=limit, offset=offset))
    items = []
    for d in datasets[:limit]:
        stats = counts(session, d.manifest_id)
        items.append({"id": d.id, "dataset": d.slug, "name": d.name, "description": d.description or "",
                      "owner": owner_name(session, d), "visibility": d.visibility,
                      "imageCount": stats["images"], "classCount": len(d.class_names or []),
                      "classNames": list(d.class_names or []), "task": d.task, "tags": list(d.tags or []),
                      "splits": {k: stats[k] for k in ("train", "val", "test", "labeled")}, "starCount": 0,
                      "sampleImages": [], "updatedAt": iso(d.updated_at)})
    return {"projects": projects, "datasets": items, "hasMore": len(datasets) > limit or more_projects}


# --- copy-on-write manifests ---------------------------------------------------------------------

def manifest_is_shared(session: Session, manifest_id: int, *, dataset_id: str) -> bool:
    other_datasets = session.scalar(select(func.count()).select_from(Dataset).where(
        Dataset.manifest_id == manifest_id, Dataset.id != dataset_id)) or 0
    versions = session.scalar(select(func.count()).select_from(DatasetVersion).where(
        DatasetVersion.manifest_id == manifest_id)) or 0
    return bool(other_datasets or versions)


def copy_manifest(session: Session, manifest_id: int) -> int:
    new = Manifest()
    session.add(new)
    session.flush()
    copy_items(session, new.id, DatasetItem.manifest_id == manifest_id)
    return new.id


def copy_items(session: Session, manifest_id: int, *where: Any) -> None:
    """Copy the items ``where`` selects into manifest ``manifest_id``, in SQL, as they are (``ITEM_COPY_COLUMNS``,
    named as the table names them: ``metadata`` is ``metadata_`` on the class)."""
    table = DatasetItem.__table__
    session.execute(insert(DatasetItem).from_select(
        ["manifest_id", *ITEM_COPY_COLUMNS],
        select(literal(manifest_id), *(table.c[c] for c in ITEM_COPY_COLUMNS)).where(*where)))


def writable_manifest(session: Session, dataset: Dataset) -> int:
    """The dataset's manifest, copied first if a clone or a version shares it (copy-on-write)."""
    if dataset.status == state.PROCESSING:
        raise Conflict("the dataset is processing an import; edit it when the import has finished")
    if manifest_is_shared(session, dataset.manifest_id, dataset_id=dataset.id):
        dataset.manifest_id = copy_manifest(session, dataset.manifest_id)
        session.flush()
    return dataset.manifest_id


def drop_manifest_if_orphan(session: Session, manifest_id: int) -> set[str]:
    """Delete the manifest and its items unless a dataset or version still uses it; returns the image digests
    it held (their bytes may now be unused: ``forget_unused_images``)."""
    used = session.scalar(select(func.count()).select_from(Dataset).where(Dataset.manifest_id == manifest_id)) or 0
    used += session.scalar(select(func.count()).select_from(DatasetVersion).where(
        DatasetVersion.manifest_id == manifest_id)) or 0
    if used:
        return set()
    digests = set(session.scalars(select(DatasetItem.sha256).where(DatasetItem.manifest_id == manifest_id)
                                  .distinct()))
    session.execute(delete(DatasetItem).where(DatasetItem.manifest_id == manifest_id))
    session.execute(delete(Manifest).where(Manifest.id == manifest_id))
    return digests


def insert_image_blob(session: Session, info: ImageInfo, thumb: str) -> None:
    """The ``ImageBlob`` row of stored image bytes (and their thumbnail), unless the bytes have one already."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    phash = info.phash - (1 << 64) if info.phash >= 1 << 63 else info.phash  # the column's signed view
    session.execute(dialect.insert(ImageBlob).on_conflict_do_nothing(index_elements=["sha256"]).values(
        sha256=info.sha256, size=info.size, width=info.width, height=info.height, format=info.format,
        phash=phash, thumb_sha256=thumb, created_at=utcnow()))


def forget_unused_images(session: Session, digests: set[str]) -> set[str]:
    """Delete the image rows of ``digests`` that no item uses any more; returns the blobs (images and their
    thumbnails) those rows held, for the collector to free once nothing else refers to them."""
    freed: set[str] = set()
    ordered = sorted(digests)
    for start in range(0, len(ordered), 500):
        chunk = ordered[start:start + 500]
        used = select(DatasetItem.sha256).where(DatasetItem.sha256.in_(chunk))
        rows = session.execute(select(ImageBlob.sha256, ImageBlob.thumb_sha256).where(
            ImageBlob.sha256.in_(chunk), ImageBlob.sha256.not_in(used))).all()
        if rows:
            session.execute(delete(ImageBlob).where(ImageBlob.sha256.in_([r.sha256 for r in rows])))
        freed.update(r.sha256 for r in rows)
        freed.update(r.thumb_sha256 for r in rows if r.thumb_sha256)
    return freed


# --- derived item columns and counts -------------------------------------------------------------

def label_fields(labels: list[dict] | None, class_id: int | None) -> dict[str, Any]:
    """Derived columns kept beside the labels so filters and counts never parse JSON."""
    ids = sorted({int(lbl["classId"]) for lbl in labels or []} | ({class_id} if class_id is not None else set()))
    return {"label_count": len(labels or []), "class_list": "," + "".join(f"{i}," for i in ids),
            "class_mask": class_mask(ids)}


MASK_CLASSES = 63  # bits of a signed 64-bit integer usable on SQLite and PostgreSQL alike


def class_mask(ids: Iterable[int]) -> int:
    return sum(1 << i for i in set(ids) if 0 <= i < MASK_CLASSES)


def labels_to_records(labels: list[dict] | None) -> list[Label] | None:
    return None if labels is None else [Label.from_json(x) for x in labels]


def counts(session: Session, manifest_id: int) -> dict[str, int]:
    labeled = case((or_(DatasetItem.label_count > 0, DatasetItem.class_id.is_not(None),
                        DatasetItem.labels.is_not(None)), 1), else_=0)
    rows = session.execute(select(DatasetItem.split, func.count(), func.sum(DatasetItem.label_count),
                                  func.sum(labeled))
                           .where(DatasetItem.manifest_id == manifest_id).group_by(DatasetItem.split))
    out = {"train": 0, "val": 0, "test": 0, "labeled": 0, "images": 0, "annotations": 0}
    for split, n, n_labels, n_labeled in rows:
        out[split] = int(n)
        out["images"] += int(n)
        out["annotations"] += int(n_labels or 0)
        out["labeled"] += int(n_labeled or 0)
    return out


def total_bytes(session: Session, manifest_id: int) -> int:
    return int(session.scalar(select(func.coalesce(func.sum(ImageBlob.size), 0)).join(
        DatasetItem, DatasetItem.sha256 == ImageBlob.sha256).where(DatasetItem.manifest_id == manifest_id)) or 0)


# ``counts`` and ``total_bytes`` of datasets' current content, by (what, dataset, manifest, revision). Both read
# every item (100,000 images: a tenth and half a second), and ``touch`` bumps the revision on every content
# change, so an entry is never asked for once its content has changed. An entry is kept only once the transaction
# that read it has committed: a change rolled back may have bumped a revision that a later change bumps again.
_REMEMBERED: OrderedDict[tuple[str, str, int, int], Any] = OrderedDict()
_REMEMBERED_LOCK = threading.Lock()
REMEMBERED_MAX = 512


def _remembered(session: Session, dataset: Dataset, what: str, read: Callable[[Session, int], Any]) -> Any:
    key = (what, dataset.id, dataset.manifest_id, dataset.revision)
    with _REMEMBERED_LOCK:
        if key in _REMEMBERED:
            _REMEMBERED.move_to_end(key)
            return _REMEMBERED[key]
    value = read(session, dataset.manifest_id)

    def remember() -> None:
        with _REMEMBERED_LOCK:
            _REMEMBERED[key] = value
            while len(_REMEMBERED) > REMEMBERED_MAX:
                _REMEMBERED.popitem(last=False)

    after_commit(session, remember)
    return value


def dataset_counts(session: Session, dataset: Dataset) -> dict[str, int]:
    """``counts`` of the dataset's current content (remembered per revision)."""
    return dict(_remembered(session, dataset, "counts", counts))


def dataset_bytes(session: Session, dataset: Dataset) -> int:
    """``total_bytes`` of the dataset's current content (remembered per revision)."""
    return int(_remembered(session, dataset, "bytes", total_bytes))


def remembered_count(session: Session, dataset: Dataset, what: str, count: Callable[[Session, int], int]) -> int:
    """A count over the dataset's current content (``count(session, manifest_id)``), remembered per revision
    under ``what`` like ``counts``: only for counts of what ``touch`` guards (names, splits, labels), never of
    the health checks' issue codes, which are rewritten without a revision bump."""
    return int(_remembered(session, dataset, what, count))


# --- versions (frozen manifests) -------------------------------------------------------------

def content_hash(session: Session, manifest_id: int, class_names: list[str]) -> str:
    digest = hashlib.sha256(repr(class_names).encode())
    rows = session.execute(select(DatasetItem.split, DatasetItem.name, DatasetItem.sha256, DatasetItem.labels,
                                  DatasetItem.class_id).where(DatasetItem.manifest_id == manifest_id)
                           .order_by(DatasetItem.split, DatasetItem.name))
    for row in rows:
        digest.update(repr(tuple(row)).encode())
    return digest.hexdigest()


def create_version(session: Session, dataset: Dataset, description: str = "") -> tuple[DatasetVersion, bool]:
    """Freeze the current manifest (O(1): the dataset copies on its next write). Unchanged content reuses the
    latest version instead of making an identical one."""
    latest = session.scalar(select(DatasetVersion).where(DatasetVersion.dataset_id == dataset.id)
                            .order_by(DatasetVersion.version.desc()).limit(1))
    if latest is not None and latest.source_revision == dataset.revision:
        return latest, True
    stats = counts(session, dataset.manifest_id)
    version = DatasetVersion(
        dataset_id=dataset.id, version=(latest.version + 1) if latest else 1, description=description or "",
        manifest_id=dataset.manifest_id, class_names=list(dataset.class_names or []), task=dataset.task,
        stats={**stats, "bytes": total_bytes(session, dataset.manifest_id)},
        content_hash=content_hash(session, dataset.manifest_id, list(dataset.class_names or [])),
        source_revision=dataset.revision,
    )
    session.add(version)
    session.flush()
    return version, False
