"""Clones and versions: both share a manifest (O(1)) until someone writes to it (copy-on-write).

A version freezes the current manifest with its class names and counts (``service.create_version``, which
training calls too); restoring one points the dataset back at it; comparing two lists what changed image by
image. A training run may pin a version (``pinned_version``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets import service, state
from lanner.datasets.models import Dataset, DatasetItem, DatasetVersion, ImageSelection, ImageSelectionItem, Manifest
from lanner.errors import Conflict, NotFound
from lanner.projects.schemas import REGION
from lanner.resources import VISIBILITIES
from lanner.slugs import slugify, unique_slug
from lanner.teams import permissions

COMPARE_PAGE = 500


def clone(session: Session, principal: Principal, source: Dataset, *, name: str | None, slug: str | None,
          description: str | None, visibility: str, owner: str | None, version: int | None) -> dict[str, Any]:
    """``datasets.clone``: into the caller's own workspace or a team's where they may write, of the live content
    or of one version."""
    workspace = permissions.workspace_for(session, user_id=principal.user_id, username=principal.username,
                                          owner=owner, action="write")
    copy = clone_dataset(session, principal, source, name=name, slug=slug, description=description,
                         visibility=visibility, workspace=workspace)
    if version is not None:
        frozen = get_version(session, source, version)
        copy.manifest_id, copy.class_names, copy.task = frozen.manifest_id, list(frozen.class_names), frozen.task
    session.flush()
    stats = service.counts(session, copy.manifest_id)
    return {"id": copy.id, "owner": workspace[1], "dataset": copy.slug, "name": copy.name,
            "imageCount": stats["images"], "classCount": len(copy.class_names or []), "region": REGION}


def clone_dataset(session: Session, principal: Principal, source: Dataset, *, name: str | None = None,
                  slug: str | None = None, description: str | None = None, visibility: str = "private",
                  workspace: tuple[str, str] | None = None) -> Dataset:
    """O(1): the clone shares the source's manifest until either side writes (copy-on-write). ``workspace``:
    (id, name) of where it goes, checked by the caller; the caller's own by default."""
    owner_id, owner_name = workspace or (principal.user_id, principal.username)
    base = slugify(slug or name or f"{source.slug}-clone")
    taken = set(session.scalars(select(Dataset.slug).where(Dataset.owner_id == owner_id,
                                                           Dataset.slug.like(f"{base}%"))))
    if slug and base in taken:
        raise Conflict(f"dataset '{owner_name}/{base}' already exists")
    base = unique_slug(base, taken)
    copy = Dataset(owner_id=owner_id, slug=base, name=name or base,
                   description=source.description if description is None else description,
                   visibility=visibility if visibility in VISIBILITIES else "private", task=source.task,
                   class_names=list(source.class_names or []), kpt_shape=source.kpt_shape, format=source.format,
                   tags=list(source.tags or []), license=source.license, metadata_=dict(source.metadata_ or {}),
                   cloned_from_id=source.id, manifest_id=source.manifest_id, revision=0)
    state.created(session, copy, reason=f"cloned from {source.id}")
    return copy


def clone_selection(session: Session, principal: Principal, source: Dataset, selection: ImageSelection, *,
                    name: str | None) -> dict[str, Any]:
    """A new private dataset in the caller's workspace of just the images of ``selection`` (already checked to
    be the caller's) as they are now: names, splits, labels and the class names. A subset cannot share the
    source's manifest, so its items are copied in SQL (the images' bytes are shared by digest; keys survive)."""
    chosen = select(ImageSelectionItem.key).where(ImageSelectionItem.selection_id == selection.id)
    copy = clone_dataset(session, principal, source, name=name or f"{source.name} (selection)",
                         description=f"{selection.count} images selected from {source.name}")
    manifest = Manifest()
    session.add(manifest)
    session.flush()
    service.copy_items(session, manifest.id, DatasetItem.manifest_id == source.manifest_id,
                       DatasetItem.key.in_(chosen))
    copy.manifest_id = manifest.id
    session.flush()
    stats = service.counts(session, manifest.id)
    return {"id": copy.id, "owner": principal.username, "dataset": copy.slug, "name": copy.name,
            "imageCount": stats["images"]}


def get_version(session: Session, dataset: Dataset, number: int) -> DatasetVersion:
    version = session.scalar(select(DatasetVersion).where(DatasetVersion.dataset_id == dataset.id,
                                                          DatasetVersion.version == number))
    if version is None:
        raise NotFound(f"dataset version {number} not found")
    return version


def restore_version(session: Session, dataset: Dataset, number: int) -> DatasetVersion:
    version = get_version(session, dataset, number)
    old = dataset.manifest_id
    dataset.manifest_id = version.manifest_id  # shared with the version: the next write copies it
    dataset.class_names = list(version.class_names)
    dataset.task = version.task
    service.touch(dataset)
    session.flush()
    service.drop_manifest_if_orphan(session, old)
    return version


def compare_manifests(session: Session, base: int, head: int) -> list[dict[str, Any]]:
    """Added, removed, modified (labels changed) and moved (split changed) images between two manifests."""
    def load(manifest_id: int) -> dict[str, tuple]:
        rows = session.execute(select(DatasetItem.key, DatasetItem.name, DatasetItem.split, DatasetItem.sha256,
                                      DatasetItem.labels, DatasetItem.label_count, DatasetItem.class_id)
                               .where(DatasetItem.manifest_id == manifest_id))
        return {r.key: tuple(r) for r in rows}

    old, new = load(base), load(head)
    changes = []
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        ref = b or a
        assert ref is not None
        entry: dict[str, Any] = {"hash": ref[3], "name": ref[1], "ext": ref[1].rsplit(".", 1)[-1].lower()}
        if a is None:
            change, fields, added, removed = "added", [], b[5], 0  # type: ignore[index]
        elif b is None:
            change, fields, added, removed = "removed", [], 0, a[5]
        else:
            fields = []
            if (a[4] or []) != (b[4] or []) or a[6] != b[6]:
                fields.append("labels")
            if a[1] != b[1]:
                fields.append("name")
            if a[3] != b[3]:
                fields.append("size")
            if not fields and a[2] == b[2]:
                continue
            change = "modified" if fields else "moved"
            added, removed = _label_delta(a[4] or [], b[4] or [])
        entry.update(change=change, fields=fields, labelsAdded=added, labelsRemoved=removed)
        if a is not None:
            entry["base"] = {"split": a[2], "labelCount": a[5]}
        if b is not None:
            entry["head"] = {"split": b[2], "labelCount": b[5]}
        changes.append(entry)
    return changes


def _label_delta(old: list[dict], new: list[dict]) -> tuple[int, int]:
    def key(label: dict) -> str:
        return repr(sorted(label.items()))

    before, after = [key(x) for x in old], [key(x) for x in new]
    remaining = list(before)
    added = 0
    for k in after:
        if k in remaining:
            remaining.remove(k)
        else:
            added += 1
    return added, len(remaining)


def compare(session: Session, dataset: Dataset, *, base: int, head: int, cursor: str | None) -> dict[str, Any]:
    """``datasets.compare``: what changed between two versions (0 = the current content), a page at a time."""
    def manifest(number: int) -> tuple[int, list[str]]:
        if number == 0:
            return dataset.manifest_id, list(dataset.class_names or [])
        version = get_version(session, dataset, number)
        return version.manifest_id, list(version.class_names)

    (base_manifest, base_names), (head_manifest, head_names) = manifest(base), manifest(head)
    items = compare_manifests(session, base_manifest, head_manifest)
    start = int(cursor) if cursor and cursor.isdigit() else 0
    page = items[start:start + COMPARE_PAGE]
    summary = {
        "added": sum(i["change"] == "added" for i in items), "removed": sum(i["change"] == "removed" for i in items),
        "modified": sum(i["change"] == "modified" for i in items), "moved": sum(i["change"] == "moved" for i in items),
        "labelsAdded": sum(i["labelsAdded"] for i in items), "labelsRemoved": sum(i["labelsRemoved"] for i in items),
        "header": {"classesAdded": [n for n in head_names if n not in base_names],
                   "classesRemoved": [n for n in base_names if n not in head_names], "classesRenamed": [],
                   "changed": ["classNames"] if base_names != head_names else []},
    }
    body: dict[str, Any] = {"summary": summary, "items": page}
    if start + COMPARE_PAGE < len(items):
        body["nextCursor"] = str(start + COMPARE_PAGE)
    return body


def pinned_version(session: Session, dataset: Dataset, version_id: int | None) -> DatasetVersion | None:
    """The version a training run pinned (``version_id``, from the run's key), if it is one of this dataset's:
    its worker trains on it at its first launch and every relaunch, whatever happened to the live dataset."""
    if version_id is None:
        return None
    version = session.get(DatasetVersion, version_id)
    return version if version is not None and version.dataset_id == dataset.id else None
