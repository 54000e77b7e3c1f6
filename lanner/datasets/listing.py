"""Reading a dataset's images: the filtered, sorted, paged list, a chosen few, one image's details and signed
links. Filters and paging touch ``dataset_items`` only (its indexes cover them); image facts are joined for the
page's rows alone, so page 500 costs about what page 1 does."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import BigInteger, Integer, Select, and_, bindparam, func, null, or_, select, tuple_
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets import items, service
from lanner.datasets.models import Dataset, DatasetItem, DatasetVersion, ImageBlob, ImageSelectionItem
from lanner.datasets.records import SPLITS
from lanner.datasets.schemas import image_items
from lanner.db import iso
from lanner.errors import BadRequest
from lanner.projects.schemas import REGION
from lanner.storage.signing import URLSigner

# sort -> (column, descending): the SDK's names (``name-asc``, ``width-desc``...) and Lanner's older short ones.
SORTS = {"name": (DatasetItem.name, False), "-name": (DatasetItem.name, True),
         "newest": (DatasetItem.id, True), "oldest": (DatasetItem.id, False),
         "labels": (DatasetItem.label_count, False), "-labels": (DatasetItem.label_count, True),
         **{f"{name}-{way}": (column, way == "desc") for name, column in (
             ("name", DatasetItem.name), ("labels", DatasetItem.label_count), ("width", ImageBlob.width),
             ("height", ImageBlob.height), ("size", ImageBlob.size)) for way in ("asc", "desc")}}


@dataclass(frozen=True)
class Ranking:
    """Another domain's number per image (the review scores: ``review.grid``), known to this module only as SQL.
    ``values``: a subquery of ``key`` and ``value`` for this dataset's images, to order by (highest first, images
    without one last, then by key) instead of ``sort``; ``only``: a select of the keys to keep (a filter on the
    same numbers). Either may be None. Its statements are built per request, uncached: its values are bound in
    them."""

    values: Any = None
    only: Any = None


def _image_rows(manifest_id: int | None = None, *, labels: bool = True) -> Select[Any]:
    """The columns ``schemas.image_items`` reads; the labels JSON only when the caller shows them (no JSON to
    read and decode for the SDK's default page). Without ``manifest_id`` the caller adds its condition."""
    rows = (select(DatasetItem.key, DatasetItem.name, DatasetItem.split, DatasetItem.sha256,
                   DatasetItem.labels if labels else null().label("labels"), DatasetItem.label_count,
                   DatasetItem.issues, ImageBlob.width, ImageBlob.height, ImageBlob.size, ImageBlob.thumb_sha256)
            .join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256))
    return rows if manifest_id is None else rows.where(DatasetItem.manifest_id == manifest_id)


def _count_of(*conditions: Any) -> Any:
    return select(func.count()).select_from(DatasetItem).where(*conditions)


# The statements are built once per shape with bound parameters (``:manifest``, ``:split``...): building them
# from expressions on every request took about 1 ms of a 4 ms request (in-process, on the benchmark machine),
# more than SQLite takes to run them.
_MANIFEST = DatasetItem.manifest_id == bindparam("manifest")
# How many images have an issue code (``issues != ','``): the sum of two ranges of
# ``ix_dataset_items_manifest_issues``, below and above ``','``, which read only the entries of images with
# issues. For ``!=``, or the two ranges OR-ed, SQLite walks every entry of the manifest (100,000 items: 4.5 ms).
_ERROR_COUNT = select(_count_of(_MANIFEST, DatasetItem.issues < ",").scalar_subquery()
                      + _count_of(_MANIFEST, DatasetItem.issues > ",").scalar_subquery())


def _error_count(session: Session, manifest_id: int) -> int:
    return int(session.scalar(_ERROR_COUNT, {"manifest": manifest_id}) or 0)


def _filters(dataset: Dataset, *, split: str | None, has_error: bool | None, has_label: bool | None,
             class_ids: str | None, text: str | None, issue: str | None, selection: str | None = None
             ) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The filters as a shape (which conditions, for ``_where``) and the values of its parameters.
    ``selection``: an ``ImageSelection``'s id the caller was checked against (``datasets.selections.get``)."""
    shape: list[str] = []
    params: dict[str, Any] = {"manifest": dataset.manifest_id}
    if selection:
        shape.append("selection")
        params["selection"] = selection
    if split:
        if split not in SPLITS:
            raise BadRequest("split must be train, val or test")
        shape.append("split")
        params["split"] = split
    if has_label is not None:
        shape.append("labelled" if has_label else "unlabelled")
    if has_error is not None:
        shape.append("error" if has_error else "clean")
    if issue:
        shape.append("issue")
        params["issue"] = f"%,{issue},%"
    if class_ids:
        try:
            ids = [int(x) for x in class_ids.split(",") if x.strip()]
        except ValueError:
            raise BadRequest("classIds must be comma-separated integers") from None
        if ids and all(0 <= i < service.MASK_CLASSES for i in ids):
            shape.append("mask")
            params["mask"] = service.class_mask(ids)
        elif ids:
            shape.append(f"classes:{len(ids)}")
            params.update({f"class_{n}": f"%,{i},%" for n, i in enumerate(ids)})
    if text:
        shape.append("text")
        params["text"] = f"%{text}%"
    return tuple(shape), params


_LABELLED = (DatasetItem.label_count > 0) | DatasetItem.class_id.is_not(None)
_CONDITIONS = {
    "split": DatasetItem.split == bindparam("split"),
    "labelled": _LABELLED,
    "unlabelled": ~_LABELLED,
    "error": DatasetItem.issues != ",",
    "clean": DatasetItem.issues == ",",
    "issue": DatasetItem.issues.like(bindparam("issue")),
    "mask": DatasetItem.class_mask.op("&")(bindparam("mask", type_=BigInteger)) != 0,
    "text": DatasetItem.name.like(bindparam("text")),
    "selection": DatasetItem.key.in_(select(ImageSelectionItem.key).where(
        ImageSelectionItem.selection_id == bindparam("selection"))),
}


def _where(shape: tuple[str, ...]) -> list[Any]:
    conditions = [_MANIFEST]
    for name in shape:
        kind, _, count = name.partition(":")
        conditions.append(or_(*[DatasetItem.class_list.like(bindparam(f"class_{n}")) for n in range(int(count))])
                          if kind == "classes" else _CONDITIONS[name])
    return conditions


@lru_cache(maxsize=256)
def _total_statement(shape: tuple[str, ...]) -> Select[Any]:
    return _count_of(*_where(shape))


@lru_cache(maxsize=256)
def _page_statement(shape: tuple[str, ...], sort: str, labels: bool) -> Select[Any]:
    return _paged(shape, sort, labels, None)


def _paged(shape: tuple[str, ...], sort: str, labels: bool, ranking: Ranking | None) -> Select[Any]:
    """One page (and one row more, to know if there is a next). The page's ids are found on the covering index
    alone, then joined to their columns and images: with ``id IN (page)`` the planner walked the whole manifest
    in index order testing each row against the page (9 ms a page at 100,000 items). With a ``ranking`` that
    has values, the ids come from an outer join to them, ordered in SQL (no-value last, on SQLite and
    PostgreSQL alike)."""
    where = _where(shape) if ranking is None or ranking.only is None else [
        *_where(shape), DatasetItem.key.in_(ranking.only)]
    if ranking is not None and ranking.values is not None:
        values = ranking.values
        unranked = values.c.value.is_(None)
        ids = (select(DatasetItem.id, unranked.label("unranked"), values.c.value.label("rank"))
               .outerjoin(values, values.c.key == DatasetItem.key))
        order = [unranked, values.c.value.desc(), DatasetItem.key]
    else:
        column, descending = SORTS[sort]
        order = [column.desc() if descending else column.asc(), DatasetItem.key]
        ids = select(DatasetItem.id)
        if column.table is ImageBlob.__table__:  # width, height, size: the image's, not the item's
            ids = ids.join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
    page = (ids.where(*where).order_by(*order)
            .offset(bindparam("offset", type_=BigInteger)).limit(bindparam("limit", type_=Integer)).subquery("page"))
    rows = _image_rows(labels=labels).where(_MANIFEST).join(page, page.c.id == DatasetItem.id)
    if ranking is not None and ranking.values is not None:
        return rows.order_by(page.c.unranked, page.c.rank.desc(), DatasetItem.key)
    return rows.order_by(*order)


def _total(session: Session, dataset: Dataset, shape: tuple[str, ...], params: dict[str, Any], *,
           remember: bool) -> int:
    """How many images pass the filters. SDK clients page with ``includeTotal`` on every page: a count that
    depends on the items' content alone (``remember``) is made once per dataset revision and filter
    (``service.remembered_count``); one that reads the issue codes is counted each time (the health checks
    rewrite them without a revision bump)."""
    def count(s: Session, manifest_id: int) -> int:
        return int(s.scalar(_total_statement(shape), {**params, "manifest": manifest_id}) or 0)

    if not remember:
        return count(session, dataset.manifest_id)
    what = repr((shape, sorted((k, v) for k, v in params.items() if k != "manifest")))
    return service.remembered_count(session, dataset, f"listing-total:{what}", count)


def list_images(session: Session, dataset: Dataset, *, signer: URLSigner, limit: int, offset: int,
                cursor: str | None, include_total: bool, split: str | None, has_error: bool | None,
                has_label: bool | None, class_ids: str | None, text: str | None, issue: str | None, sort: str,
                thumbnails: bool, urls: bool, labels: bool, selection: str | None = None,
                ranking: Ranking | None = None) -> dict[str, Any]:
    """``datasets.images``: one page of the images that pass every filter, with a cursor to the next.
    ``selection``: only the images of that (already checked) selection: the grid's ``?sel=``. ``ranking``: ordered
    by it instead of ``sort`` (and filtered by its ``only``): the grid's review-score orders."""
    shape, params = _filters(dataset, split=split, has_error=has_error, has_label=has_label, class_ids=class_ids,
                             text=text, issue=issue, selection=selection)
    if sort not in SORTS:
        raise BadRequest(f"sort must be one of {', '.join(SORTS)}")
    if cursor:
        if not cursor.isdigit():
            raise BadRequest("cursor must come from nextCursor")
        offset = int(cursor)
    total = None
    if include_total and ranking is not None and ranking.only is not None:  # the scores change with no revision
        total = int(session.scalar(_count_of(*_where(shape), DatasetItem.key.in_(ranking.only)), params) or 0)
    elif include_total:
        total = _total(session, dataset, shape, params, remember=has_error is None and not issue)
    statement = _page_statement(shape, sort, labels) if ranking is None else _paged(shape, sort, labels, ranking)
    rows = session.execute(statement, {**params, "offset": offset, "limit": limit + 1}).all()
    has_more = len(rows) > limit
    images = image_items(signer, dataset.id, rows[:limit], thumbnails=thumbnails, urls=urls, labels=labels)
    body: dict[str, Any] = {"images": images, "hasMore": has_more, "classes": list(dataset.class_names or []),
                            "errorCount": _error_count(session, dataset.manifest_id)}
    if total is not None:
        body["total"] = total
    if has_more:
        body["nextCursor"] = str(offset + limit)
    return body


def next_unlabelled(session: Session, dataset: Dataset, *, after: str | None,
                    selection: str | None) -> tuple[str | None, int]:
    """The label queue: the first unlabelled image after the image ``after`` in the grid's order (name, key),
    else round again from the first one (never ``after`` itself), and how many unlabelled images are left.
    ``selection``: within that (already checked) selection only. Skipping an image moves on instead of coming
    back to it, and an image labelled meanwhile simply drops out."""
    shape, params = _filters(dataset, split=None, has_error=None, has_label=False, class_ids=None, text=None,
                             issue=None, selection=selection)
    where = _where(shape)
    left = int(session.scalar(_count_of(*where), params) or 0)
    keys = select(DatasetItem.key).where(*where).order_by(DatasetItem.name, DatasetItem.key).limit(1)
    current = session.execute(select(DatasetItem.name, DatasetItem.key).where(
        DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.key == after)).first() if after else None
    if current is not None:
        later = session.scalar(keys.where(tuple_(DatasetItem.name, DatasetItem.key)
                                          > tuple_(current.name, current.key)), params)
        if later:
            return later, left
    return session.scalar(keys.where(DatasetItem.key != (after or "")), params), left


def selected_images(session: Session, dataset: Dataset, image_ids: list[str], *, signer: URLSigner,
                    thumbnails: bool, urls: bool, labels: bool) -> dict[str, Any]:
    """``datasets.selected_images``: the images of this dataset among ``image_ids``, by name."""
    keys = [items.split_image_id(i)[1] for i in image_ids if i.startswith(dataset.id + "-")]
    rows = session.execute(_image_rows(dataset.manifest_id, labels=labels).where(DatasetItem.key.in_(keys))
                           .order_by(DatasetItem.name)).all()
    images = image_items(signer, dataset.id, rows, thumbnails=thumbnails, urls=urls, labels=labels)
    return {"images": images, "total": len(images), "hasMore": False, "classes": list(dataset.class_names or []),
            "errorCount": _error_count(session, dataset.manifest_id)}


def image_detail(session: Session, principal: Principal, image_id: str) -> dict[str, Any]:
    """``images.retrieve``: one image's properties, labels and its dataset's class names."""
    dataset, item = items.resolve_image(session, principal, image_id)
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
    return {"metadata": dict(item.metadata_ or {}), "properties": properties, "labels": list(item.labels or []),
            "classNames": list(dataset.class_names or [])}


def image_urls(session: Session, principal: Principal, image_ids: list[str], *, signer: URLSigner,
               ) -> dict[str, Any]:
    """``images.urls``: signed links to the images (and their thumbnails) the caller may read."""
    urls, thumbnails = {}, {}
    for dataset_id, keys in items.group_image_ids(image_ids).items():
        dataset = service.get_dataset_by_id(session, principal, dataset_id)
        for row in session.execute(_image_rows(dataset.manifest_id, labels=False).where(DatasetItem.key.in_(keys))):
            image_id = f"{dataset_id}-{row.key}"
            urls[image_id] = signer.download_url(row.sha256, row.name)
            if row.thumb_sha256:
                thumbnails[image_id] = signer.download_url(row.thumb_sha256, "thumb.jpg")
    return {"urls": urls, "thumbnails": thumbnails, "depths": {}}


def neighbours(session: Session, dataset: Dataset, key: str) -> tuple[str | None, str | None]:
    """The keys of the images before and after ``key`` in the grid's order (name, then key), on the
    (manifest, name, key) index; None at either end."""
    name = session.scalar(select(DatasetItem.name).where(DatasetItem.manifest_id == dataset.manifest_id,
                                                         DatasetItem.key == key))
    if name is None:
        return None, None
    here = DatasetItem.manifest_id == dataset.manifest_id
    before = or_(DatasetItem.name < name, and_(DatasetItem.name == name, DatasetItem.key < key))
    after = or_(DatasetItem.name > name, and_(DatasetItem.name == name, DatasetItem.key > key))
    previous = session.scalar(select(DatasetItem.key).where(here, before)
                              .order_by(DatasetItem.name.desc(), DatasetItem.key.desc()).limit(1))
    following = session.scalar(select(DatasetItem.key).where(here, after)
                               .order_by(DatasetItem.name, DatasetItem.key).limit(1))
    return previous, following
