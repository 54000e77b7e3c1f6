"""Storage integrations: connect (credentials checked against the bucket, then sealed), list, change, disconnect,
browse objects, discover buckets and count what a prefix holds. Plain functions, session first; every lookup is
by the caller's own rows, so someone else's integration is a 404 like one that does not exist."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import PurePosixPath
from typing import Any

import obstore
from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.db import iso
from lanner.errors import BadRequest, LannerError, NotFound
from lanner.integrations import crypto, stores
from lanner.integrations.guard import check_endpoint, parse_networks
from lanner.integrations.models import StorageIntegration

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}
LABEL_SUFFIXES = {".txt"}
PAGE = 1000  # objects per page of ``objects``
REQUIRED = {"s3": ("accessKeyId", "secretAccessKey"), "gcs": ("serviceAccountKey",),
            "azure": ("accountName", "accountKey")}


class BucketUnreachable(BadRequest):
    code = "bucket_unreachable"


def to_json(row: StorageIntegration) -> dict[str, Any]:
    return {"id": row.id, "provider": row.provider, "credentialIdentity": row.identity, "targets": list(row.targets),
            "processing": row.processing, "createdAt": iso(row.created_at)}


def _split(settings: Settings, provider: str, credentials: dict[str, Any]) -> tuple[dict[str, Any], str | None,
                                                                                    str | None]:
    """The secret part, the endpoint (checked against the guard now, for a clear 400) and the region."""
    missing = [name for name in REQUIRED[provider] if not credentials.get(name)]
    if missing:
        raise BadRequest(f"{provider} credentials need {', '.join(missing)}")
    endpoint = credentials.get("endpoint") or None
    if endpoint is not None:
        endpoint = check_endpoint(str(endpoint), parse_networks(settings.bucket_allowed_networks),
                                  stores.guard_for(settings).resolver)
    region = str(credentials["region"])[:64] if credentials.get("region") else None
    secret = {name: credentials[name] for name in (*REQUIRED[provider], "sessionToken") if credentials.get(name)}
    return secret, endpoint, region


def _identity(provider: str, secret: dict[str, Any]) -> str:
    if provider == "s3":
        return str(secret["accessKeyId"])[:300]
    if provider == "azure":
        return str(secret["accountName"])[:300]
    try:  # the key's e-mail, whether the key came as the JSON file's object or its text
        return str(stores.service_account_key(secret).get("client_email") or "service account")[:300]
    except ValueError:
        return "service account"


def reworded(exc: Exception, *, guarded: bool = False) -> BucketUnreachable:
    """An error from the client, without anything it might echo (a URL with a signature, a key id).
    ``guarded``: the guard refused a connection during the call (an https tunnel's refusal reads only as a failed
    tunnel)."""
    text = str(exc)
    if guarded or "403 Forbidden: the endpoint resolves to" in text:
        return BucketUnreachable("the bucket's endpoint resolves to an address the operator has not allowed",
                                 code="endpoint_refused")
    kind = type(exc).__name__
    return BucketUnreachable(f"the bucket could not be read ({kind}); check the target, the endpoint and that "
                             "the credentials may list and read it")


@contextmanager
def reading(settings: Settings) -> Iterator[None]:
    """Around a call to a user's bucket: any client error becomes a 400 that echoes nothing of it, naming the
    guard when the guard refused a connection meanwhile. A missing object (FileNotFoundError) passes through:
    the caller reports it as deleted."""
    guard = stores.guard_for(settings)
    before = guard.refused
    try:
        yield
    except (LannerError, FileNotFoundError):
        raise
    except Exception as exc:  # noqa: BLE001 -- any client error is the user's bucket refusing: a 400 saying so
        raise reworded(exc, guarded=guard.refused > before) from None


def _verify(settings: Settings, provider: str, secret: dict[str, Any], target: str, endpoint: str | None,
            region: str | None) -> None:
    store = stores.build_store(settings, provider=provider, credentials=secret, target=target, endpoint=endpoint,
                               region=region)
    with reading(settings):
        next(iter(obstore.list(store, chunk_size=1)), None)


def create(session: Session, settings: Settings, principal: Principal, *, provider: str,
           credentials: dict[str, Any], targets: list[str]) -> StorageIntegration:
    """Check that the credentials can list every target, then store them sealed."""
    secret, endpoint, region = _split(settings, provider, credentials)
    sealed = crypto.seal(settings, secret)  # 503 before any request when the operator has no key set
    names = list(dict.fromkeys(t.strip() for t in targets if t.strip()))
    if not names:
        raise BadRequest("targets must name at least one bucket or container")
    for target in names:
        _verify(settings, provider, secret, target, endpoint, region)
    row = StorageIntegration(owner_id=principal.user_id, provider=provider, identity=_identity(provider, secret),
                             targets=names, endpoint=endpoint, region=region, secret=sealed)
    session.add(row)
    session.flush()
    return row


def discover(settings: Settings, *, provider: str, credentials: dict[str, Any]) -> list[str]:
    """The buckets (S3, the GCS key's project) or containers (Azure) these credentials can list. A read-only
    key often may not list them: then this is a 400 and the targets are named in ``create``."""
    secret, endpoint, region = _split(settings, provider, credentials)
    with reading(settings):
        return stores.list_targets(settings, provider=provider, credentials=secret, endpoint=endpoint,
                                   region=region)


def list_mine(session: Session, principal: Principal) -> list[StorageIntegration]:
    return list(session.scalars(select(StorageIntegration).where(StorageIntegration.owner_id == principal.user_id)
                                .order_by(StorageIntegration.created_at)))


def get(session: Session, principal: Principal, integration_id: str) -> StorageIntegration:
    row = session.get(StorageIntegration, integration_id)
    if row is None or row.owner_id != principal.user_id:
        raise NotFound(f"storage integration '{integration_id}' not found")
    return row


def open_store(settings: Settings, row: StorageIntegration, target: str) -> Any:
    """A store for one of the integration's targets (any other is a 404: the credentials were connected for
    these)."""
    if target not in row.targets:
        raise NotFound(f"'{target}' is not a target of this storage integration")
    return stores.build_store(settings, provider=row.provider, credentials=crypto.unseal(settings, row.secret),
                              target=target, endpoint=row.endpoint, region=row.region)


def objects(settings: Settings, row: StorageIntegration, *, target: str, prefix: str, cursor: str | None
            ) -> dict[str, Any]:
    """Folders and objects right under ``prefix``, a page at a time (``cursor``: the last key of the page)."""
    store = open_store(settings, row, target)
    with reading(settings):
        listing = obstore.list_with_delimiter(store, prefix or None)
    entries: list[dict[str, Any]] = [
        {"kind": "folder", "name": PurePosixPath(p).name, "key": p.rstrip("/") + "/"}
        for p in listing["common_prefixes"]]
    entries += [{"kind": "file", "name": PurePosixPath(o["path"]).name, "key": o["path"], "size": o["size"],
                 "updatedAt": o["last_modified"].isoformat().replace("+00:00", "Z")} for o in listing["objects"]]
    entries.sort(key=lambda e: e["key"])
    if cursor:
        entries = [e for e in entries if e["key"] > cursor]
    body: dict[str, Any] = {"entries": entries[:PAGE]}
    if len(entries) > PAGE:
        body["cursor"] = entries[PAGE - 1]["key"]
    return body


def scan(settings: Settings, row: StorageIntegration, *, target: str, prefix: str) -> dict[str, Any]:
    """Lanner: what an import of ``prefix`` would find, per folder right under it: image files and label
    files (``.txt``), counted up to ``LANNER_BUCKET_MAX_OBJECTS``."""
    store = open_store(settings, row, target)
    base = prefix.rstrip("/") + "/" if prefix else ""
    images: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    seen, truncated = 0, False
    with reading(settings):
        for batch in obstore.list(store, base or None, chunk_size=1000):
            for meta in batch:
                seen += 1
                if seen > settings.bucket_max_objects:
                    truncated = True
                    break
                rest = meta["path"][len(base):]
                folder = base + rest.split("/", 1)[0] + "/" if "/" in rest else base
                suffix = PurePosixPath(rest).suffix.lower()
                if suffix in IMAGE_SUFFIXES:
                    images[folder] += 1
                elif suffix in LABEL_SUFFIXES:
                    labels[folder] += 1
            if truncated:
                break
    folders = sorted(set(images) | set(labels))
    return {"target": target, "prefix": base, "images": sum(images.values()), "labels": sum(labels.values()),
            "truncated": truncated,
            "prefixes": [{"prefix": f, "images": images[f], "labels": labels[f]} for f in folders]}


def update(row: StorageIntegration, *, processing: bool) -> StorageIntegration:
    row.processing = processing
    return row


def delete(session: Session, row: StorageIntegration) -> None:
    """The sealed credentials go; the bucket objects' rows stay (``integration_id`` set null), so the datasets
    stay visible and report their pixels unavailable."""
    session.delete(row)
    session.flush()
