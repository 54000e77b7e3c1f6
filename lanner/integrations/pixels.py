"""A bucket image's pixels: served as a presigned URL to the object, after its ETag is compared with the one
pinned at import; a changed or deleted object is reported (409, and its ``state`` recorded), never served in
place of the image that was labelled. ``recheck`` compares a whole dataset's objects in a few listings.

Where else bucket pixels meet the rest of Lanner: links (``held_elsewhere``: the signer routes them through the
blob route and ``locate``), exports (``ExportPixels``: URLs for NDJSON, bytes for a YOLO zip; also the bytes
predictions, proposals and the labelling assistant read, through ``inference.service.DatasetPixels``), the pages'
Content-Security-Policy (``link_origins``), ``account.storage`` (``bucket_bytes``) and the integration's
``processing`` switch for AI features (``require_processing``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator
from typing import Any
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import PreconditionError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.config import Settings
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.db import Database, utcnow
from lanner.errors import Conflict, NotFound
from lanner.integrations import service, stores
from lanner.integrations.models import BucketObject, StorageIntegration

CHANGED, MISSING, OK = "changed", "missing", "ok"


class ObjectChanged(Conflict):
    code = "bucket_object_changed"


def _pinned(session: Session, owner_id: str, sha256: str) -> BucketObject | None:
    """The workspace's pin of ``sha256``: one still found as imported first, then the newest."""
    return session.scalar(select(BucketObject).where(BucketObject.owner_id == owner_id, BucketObject.sha256 == sha256)
                          .order_by((BucketObject.state == OK).desc(), BucketObject.id.desc()).limit(1))


def source_of(session: Session, dataset: Dataset, sha256: str) -> BucketObject:
    row = _pinned(session, dataset.owner_id, sha256)
    if row is None:
        raise NotFound("this image is not stored in a bucket")
    return row


def locate(session: Session, sha256: str, ttl: int, *, settings: Settings) -> str | None:
    """The blob route's locator (``AppContext.pixel_locators``): a signed link to a bucket image is answered with
    a presigned URL to its pinned object, whoever imported it (the signature is the credential, as for any blob);
    None for bytes no bucket holds. A changed or deleted object is a 409, as on ``/api/images/{id}/source``."""
    row = session.scalar(select(BucketObject).where(BucketObject.sha256 == sha256)
                         .order_by((BucketObject.state == OK).desc(), BucketObject.id.desc()).limit(1))
    if row is None:
        return None
    try:
        return presigned_url(session, settings, row, ttl=ttl)
    finally:
        session.commit()  # the state found (ok, changed, missing) stays recorded, whatever is answered


def held_elsewhere(db: Database, digests: Collection[str]) -> set[str]:
    """The signer's ``elsewhere`` (``URLSigner``): which of ``digests`` are bucket images' pixels, so their links
    go through the blob route and ``locate`` rather than to a blob store's own key for them. One indexed query,
    on a read session of its own (the signer is handed no session; the pins it reads were committed by their
    import)."""
    if not digests:
        return set()
    with db.read_session() as session:
        return set(session.scalars(select(BucketObject.sha256).where(BucketObject.sha256.in_(list(digests)))
                                   .distinct()))


def bucket_bytes(session: Session, dataset: Dataset) -> int:
    """The bytes of the dataset's current images whose pixels stay in a bucket: ``account.storage`` leaves them
    out (it counts what Lanner stores; of a bucket image that is its thumbnail and labels, not its pixels)."""
    pinned = select(BucketObject.sha256).where(BucketObject.owner_id == dataset.owner_id)
    return int(session.scalar(select(func.coalesce(func.sum(ImageBlob.size), 0))
                              .join(DatasetItem, DatasetItem.sha256 == ImageBlob.sha256)
                              .where(DatasetItem.manifest_id == dataset.manifest_id,
                                     DatasetItem.sha256.in_(pinned))) or 0)


class ProcessingOff(Conflict):
    code = "bucket_processing_off"


def require_processing(session: Session, dataset: Dataset, feature: str) -> None:
    """Refuse (409) ``feature``, one of the AI features the SDK's ``processing`` flag governs (smart annotation,
    auto-annotation, similar-image search, dataset analysis, cloud training, image generation), on a dataset with
    images from a bucket whose integration has processing turned off. Asked when such work starts: turning it
    off stops new work, not a run already going. Browsing, labelling and exports stay allowed."""
    shas = select(DatasetItem.sha256).where(DatasetItem.manifest_id == dataset.manifest_id)
    off_id = session.scalar(select(StorageIntegration.id)
                            .join(BucketObject, BucketObject.integration_id == StorageIntegration.id)
                            .where(BucketObject.owner_id == dataset.owner_id, BucketObject.sha256.in_(shas),
                                   StorageIntegration.processing.is_(False)).limit(1))
    off = session.get(StorageIntegration, off_id) if off_id is not None else None
    if off is not None:
        raise ProcessingOff(f"{feature} is turned off for this dataset: its images are in a bucket "
                            f"({', '.join(off.targets)}) whose storage integration {off.id} has processing off; "
                            "turn processing on (storage_integrations.update processing=true) to use it")


def link_origins(session: Session, settings: Settings, dataset: Dataset, sha256: str | None = None) -> list[str]:
    """The origins (scheme, host and port) of the presigned URLs the dataset's bucket images redirect to, or of
    image ``sha256``'s alone: a page showing them allows these in its Content-Security-Policy, and only these.
    Read from a URL signed here, so no request is made (on AWS the bucket's virtual host)."""
    shas = [sha256] if sha256 else select(DatasetItem.sha256).where(DatasetItem.manifest_id == dataset.manifest_id)
    places = session.execute(select(BucketObject.integration_id, BucketObject.target).distinct().where(
        BucketObject.owner_id == dataset.owner_id, BucketObject.sha256.in_(shas),
        BucketObject.integration_id.is_not(None))).all()
    origins = []
    for integration_id, target in places:
        integration = session.get(StorageIntegration, integration_id)
        if integration is None or target not in integration.targets:
            continue
        parts = urlsplit(stores.presign(service.open_store(settings, integration, target), "origin", 60))
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return sorted(set(origins))


def _store(session: Session, settings: Settings, row: BucketObject) -> Any:
    integration = session.get(StorageIntegration, row.integration_id) if row.integration_id else None
    if integration is None:
        raise ObjectChanged("the bucket this image is in was disconnected; reconnect it to read the image")
    return service.open_store(settings, integration, row.target)


def presigned_url(session: Session, settings: Settings, row: BucketObject, *, ttl: int) -> str:
    """A URL to the pinned object, or 409 when the object no longer is what was imported."""
    store = _store(session, settings, row)
    try:
        with service.reading(settings):
            meta = stores.head(store, row.key)
    except FileNotFoundError:  # ``reading`` lets it through
        _mark(row, MISSING)
        raise ObjectChanged(f"'{row.key}' was deleted from the bucket after it was imported") from None
    if stores.etag(meta.get("e_tag")) != stores.etag(row.etag):
        _mark(row, CHANGED)
        raise ObjectChanged(f"'{row.key}' changed in the bucket after it was imported (ETag {row.etag} then, "
                            f"{meta.get('e_tag')} now); re-import it to use the new content")
    _mark(row, OK)
    return stores.presign(store, row.key, ttl)


def _mark(row: BucketObject, state: str) -> None:
    row.state, row.checked_at = state, utcnow()


def recheck(session: Session, settings: Settings, dataset: Dataset) -> dict[str, Any]:
    """Every bucket object of the dataset's images compared with its bucket: one listing per folder of keys."""
    shas = select(DatasetItem.sha256).where(DatasetItem.manifest_id == dataset.manifest_id)
    rows = list(session.scalars(select(BucketObject).where(BucketObject.owner_id == dataset.owner_id,
                                                           BucketObject.sha256.in_(shas))))
    groups: dict[tuple[str | None, str], list[BucketObject]] = defaultdict(list)
    for row in rows:
        groups[(row.integration_id, row.target)].append(row)
    report: dict[str, list[str]] = {CHANGED: [], MISSING: []}
    for group in groups.values():
        store = _store(session, settings, group[0])
        folders = sorted({row.key.rpartition("/")[0] for row in group})
        current: dict[str, str] = {}
        with service.reading(settings):
            for folder in folders:
                for batch in obstore.list(store, folder + "/" if folder else None, chunk_size=1000):
                    current.update((meta["path"], stores.etag(meta.get("e_tag"))) for meta in batch)
        for row in group:
            now = current.get(row.key)
            state = OK if now == stores.etag(row.etag) else MISSING if now is None else CHANGED
            _mark(row, state)
            if state != OK:
                report[state].append(row.key)
    return {"checked": len(rows), "changed": sorted(report[CHANGED]), "missing": sorted(report[MISSING])}


class ExportPixels:
    """The one reader of bucket images' pixels, for a workspace (``owner_id``): ``url`` (called as the object
    itself) for an NDJSON export (what the trainer downloads), ``chunks`` for the bytes themselves, read through
    the guard (a YOLO zip; and, through ``inference.service.DatasetPixels``, predictions, proposals, the
    auto-annotate preview and the labelling assistant's scoring). Each object's ETag is compared first, from one
    listing per folder (cached for the reader; ``listed=False`` skips it, for a read or two, where a listing of a
    large folder would cost more than the read), and the read is conditional on it too (``if_match``): a changed
    or deleted object is refused (409 naming it) rather than hand out other pixels than those labelled. With a
    ``feature`` (an AI feature, worded as ``require_processing`` does), an object whose integration has
    ``processing`` off is refused too (409 ``bucket_processing_off``). Both answer None for an image whose
    pixels are Lanner's blobs."""

    def __init__(self, session: Session, settings: Settings, owner_id: str, *, listed: bool = True,
                 feature: str | None = None) -> None:
        self.session, self.settings, self.owner_id = session, settings, owner_id
        self.listed, self.feature = listed, feature
        self._listings: dict[tuple[str | None, str, str], dict[str, str]] = {}
        self._opened: dict[tuple[str | None, str], Any] = {}

    def _checked(self, sha256: str) -> tuple[BucketObject, Any] | None:
        """The pinned object of ``sha256`` and its store, after checking the ETag against the folder's listing."""
        row = _pinned(self.session, self.owner_id, sha256)
        if row is None:
            return None
        where = (row.integration_id, row.target)
        if where not in self._opened:
            self._opened[where] = _store(self.session, self.settings, row)
        if self.feature is not None:
            integration = self.session.get(StorageIntegration, row.integration_id)
            if integration is not None and not integration.processing:
                raise ProcessingOff(f"{self.feature} is turned off for this image: it is in a bucket "
                                    f"({row.target}) whose storage integration {integration.id} has processing "
                                    "off; turn processing on (storage_integrations.update processing=true) to use it")
        if not self.listed:
            return row, self._opened[where]  # the read's if_match is the check
        folder = row.key.rpartition("/")[0]
        if (*where, folder) not in self._listings:
            with service.reading(self.settings):
                self._listings[(*where, folder)] = {
                    meta["path"]: stores.etag(meta.get("e_tag")) for batch in obstore.list(
                        self._opened[where], folder + "/" if folder else None, chunk_size=1000) for meta in batch}
        current = self._listings[(*where, folder)].get(row.key)
        if current != stores.etag(row.etag):
            self._refuse(row, MISSING if current is None else CHANGED)
        return row, self._opened[where]

    def _refuse(self, row: BucketObject, state: str) -> None:
        _mark(row, state)
        self.session.commit()  # the report outlives the refused request
        raise ObjectChanged(f"'{row.key}' {'was deleted from' if state == MISSING else 'changed in'} the bucket "
                            "after it was imported: re-import it, or remove the image, before exporting, "
                            "training or predicting on it (POST .../bucket-check lists every such object)")

    def __call__(self, sha256: str, ttl: int) -> str | None:
        found = self._checked(sha256)
        return None if found is None else stores.presign(found[1], found[0].key, ttl)

    def chunks(self, sha256: str) -> Iterator[bytes] | None:
        """The pinned object's bytes; None for a blob. The GET is conditional on the pinned ETag, so an object
        replaced after the listing is refused too, not copied."""
        found = self._checked(sha256)
        if found is None:
            return None
        row, store = found
        with service.reading(self.settings):  # a refusal (ObjectChanged) passes through it
            try:
                result = obstore.get(store, row.key, options={"if_match": stores.etag(row.etag)} if row.etag else None)
            except (FileNotFoundError, PreconditionError) as exc:
                self._refuse(row, MISSING if isinstance(exc, FileNotFoundError) else CHANGED)
        return self._guarded(result)

    def _guarded(self, result: Any) -> Iterator[bytes]:
        with service.reading(self.settings):
            for chunk in result:
                yield bytes(chunk)


def export_urls(session: Session, settings: Settings, dataset: Dataset) -> ExportPixels | None:
    """The dataset's bucket pixels for an export (``ExportPixels``); None when the dataset's workspace has no
    bucket images at all (then exports are built and cached as before)."""
    if session.scalar(select(BucketObject.id).where(BucketObject.owner_id == dataset.owner_id).limit(1)) is None:
        return None
    return ExportPixels(session, settings, dataset.owner_id)


def owner_of(session: Session, sha256: str) -> str | None:
    """The workspace whose pin of ``sha256`` a signed link to it leads to (the one ``locate`` picks); None for
    bytes no bucket holds."""
    return session.scalar(select(BucketObject.owner_id).where(BucketObject.sha256 == sha256)
                          .order_by((BucketObject.state == OK).desc(), BucketObject.id.desc()).limit(1))
