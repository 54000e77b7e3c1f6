"""Shared inference's lookups, with the caller's access: which model (read access, and weights to run), which
image (an upload, a link this server signed, base64, an image of a dataset the caller may read), and how a
model's classes map onto a dataset's.

Sources are never fetched from other hosts: a ``source`` URL must be one of this server's own signed links
(``/api/storage/blobs/...``, what ``images.urls``, image listings and download URLs hand out), read straight from
the blob store after its signature is checked (a bucket image's from its pinned object: ``DatasetPixels``).
Anything else is refused with the reason, so a request cannot make the server reach into its network.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from urllib.parse import SplitResult, parse_qs, urlsplit

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.datasets import items
from lanner.datasets.models import Dataset, DatasetItem
from lanner.errors import Conflict, NotFound, PayloadTooLarge, Unprocessable
from lanner.inference.predictor import Weights
from lanner.integrations import pixels as bucket_pixels
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord, Project
from lanner.storage.blobs import BlobStore
from lanner.storage.references import is_referenced
from lanner.storage.signing import URLSigner
from lanner.training import refs

_BLOB_LINK = re.compile(r"^/api/storage/blobs/(?P<sha256>[0-9a-f]{64})/[^/]+$")
NOT_AN_IMAGE = "send the image as 'file' (multipart), or 'source': a link this server serves, or base64 data"


# Built once: a predict request pays for running this query, not for building it.
_MODEL_ACCESS = (select(ModelRecord.weights_sha256, Project.owner_id, Project.visibility)
                 .join(Project, Project.id == ModelRecord.project_id).join(User, User.id == Project.owner_id)
                 .where(User.username == bindparam("owner"), Project.slug == bindparam("project"),
                        ModelRecord.slug == bindparam("model")))


@dataclass(frozen=True)
class Target:
    """A model to run: its ``ul://`` URI (``modelUsed``, ``metadata.model``) and its weights."""

    uri: str
    weights: Weights


def resolve_model(session: Session, principal: Principal, *, owner: str, project: str, model: str,
                  blobs: BlobStore) -> Target:
    """The model ``owner/project/model`` if the caller may read it (another user's private model is a 404, as if
    it did not exist), with weights to run (409 without). The hot path is one indexed query of three columns;
    a miss asks ``projects.service``, whose 404 says what is missing."""
    row = session.execute(_MODEL_ACCESS, {"owner": owner.lower(), "project": project, "model": model}).first()
    if row is None or not projects_service.can_read(session, principal, owner_id=row.owner_id,
                                                    visibility=row.visibility):
        projects_service.get_model(session, principal, owner=owner, project=project, model=model)  # raises
        raise NotFound(f"model '{owner}/{project}/{model}' not found")
    uri = f"{refs.SCHEME}{owner.lower()}/{project}/{model}"
    digest = row.weights_sha256
    if not digest:
        raise Conflict(f"model '{uri}' has no weights yet: train it, or upload a checkpoint", code="no_weights")
    if not blobs.exists(digest):
        raise Conflict(f"the weights of model '{uri}' are missing from this server's storage", code="no_weights")
    return Target(uri, Weights(digest, partial(blobs.copy_to, digest)))


def resolve_model_id(session: Session, principal: Principal, model_id: str, *, blobs: BlobStore) -> Target:
    """``images.predict``'s ``modelId``: a workspace model's ``ul://owner/project/model``. The hosted platform's
    own models (sam3, yoloe26x, the language models) do not exist on a self-hosted server: a 422 that says so."""
    if not refs.is_model_uri(model_id):
        raise Unprocessable(f"modelId: '{model_id[:100]}' is a hosted model, which a self-hosted Lanner does not "
                            "offer; use a model of your workspace, ul://owner/project/model",
                            code="model_not_available")
    parts = refs.model_parts(model_id)
    if parts is None or not all(parts):
        raise Unprocessable("modelId must be ul://owner/project/model")
    owner, project, model = parts
    return resolve_model(session, principal, owner=owner, project=project, model=model, blobs=blobs)


def source_bytes(session: Session, source: str, *, signer: URLSigner, blobs: BlobStore, origins: Sequence[str],
                 max_bytes: int, settings: Settings) -> bytes:
    """The image a ``source`` names: a ``data:`` URI or plain base64, or a signed link of this server (whose
    ``origins`` are the public URL and the address the request came to)."""
    text = source.strip()
    if not text:
        raise Unprocessable(f"source is empty: {NOT_AN_IMAGE}")
    if text.startswith("data:"):
        header, _, payload = text.partition(",")
        if ";base64" not in header:
            raise Unprocessable("source: a data: URI must be base64 (data:image/jpeg;base64,...)")
        return _base64(payload, max_bytes)
    parts = urlsplit(text)
    if parts.scheme.lower() in ("http", "https") or text.startswith("/api/"):  # base64 JPEG starts "/9j/"
        return _linked(session, parts, signer=signer, blobs=blobs, origins=origins, max_bytes=max_bytes,
                       settings=settings)
    if "://" in text:
        raise Unprocessable(f"source: '{parts.scheme}' links are not read; {NOT_AN_IMAGE}")
    return _base64(text, max_bytes)


def _base64(payload: str, max_bytes: int) -> bytes:
    compact = re.sub(r"\s+", "", payload).replace("-", "+").replace("_", "/")
    if len(compact) * 3 // 4 > max_bytes:
        raise PayloadTooLarge(f"source: the image is larger than {max_bytes} bytes (LANNER_INFERENCE_MAX_BYTES)")
    try:
        return base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise Unprocessable(f"source is neither a link nor base64 image data: {NOT_AN_IMAGE}") from None


def _linked(session: Session, parts: SplitResult, *, signer: URLSigner, blobs: BlobStore, origins: Sequence[str],
            max_bytes: int, settings: Settings) -> bytes:
    scheme, netloc, path, query = parts.scheme, parts.netloc, parts.path, parts.query
    if netloc:
        origin = f"{scheme.lower()}://{netloc.lower()}"
        if origin not in {o.rstrip("/").lower() for o in origins}:
            raise Unprocessable(f"source: {netloc} is not this server; shared inference reads only images this "
                                "server serves (a signed link from images.urls or a download URL), never other "
                                "hosts: send the image as 'file' instead", code="foreign_source")
    match = _BLOB_LINK.match(path)
    if match is None:
        raise Unprocessable("source: this link is not an image file of this server; use a signed link (images.urls, "
                            "an image listing with includeImageUrls, or a download URL)")
    values = parse_qs(query)
    if not signer.verify("GET", path, _one(values, "expires"), _one(values, "signature")):
        raise Unprocessable("source: the link's signature is invalid or expired; ask for a new link")
    digest = match.group("sha256")
    owner_id = bucket_pixels.owner_of(session, digest)
    if owner_id is not None:  # a bucket image's link (the signer routes it through the blob route): its object
        return DatasetPixels(session, settings, blobs, owner_id, feature="shared inference").read(
            digest, max_bytes=max_bytes)
    if not is_referenced(session, digest) or not blobs.exists(digest):
        raise NotFound("source: the linked file no longer exists")
    with blobs.open(digest) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"source: the linked file is larger than {max_bytes} bytes (LANNER_INFERENCE_MAX_BYTES)")
    return data


def _one(values: dict[str, list[str]], name: str) -> str | None:
    found = values.get(name)
    return found[0] if found else None


def dataset_image(session: Session, principal: Principal, image_id: str) -> tuple[Dataset, DatasetItem]:
    """An image of a dataset the caller may read (404 otherwise, as if it did not exist)."""
    return items.resolve_image(session, principal, image_id)


class DatasetPixels:
    """The one way a model reads a workspace's image bytes (``images.predict``, a signed ``source`` link,
    proposals, the auto-annotate preview, the labelling assistant's scoring): a bucket image's from its pinned
    object through ``integrations.pixels.ExportPixels`` (guard, ETag, ``if_match``: a changed or deleted object
    is a 409 naming it, never other pixels), any other from the blob store. ``listed``: compare ETags from one
    listing per folder first (for many images of a dataset), else only by the read's ``if_match`` (for one or a
    few). ``feature``: refuse an object whose integration has processing off (see ``ExportPixels``)."""

    def __init__(self, session: Session, settings: Settings, blobs: BlobStore, owner_id: str, *,
                 listed: bool = False, feature: str | None = None) -> None:
        self.blobs = blobs
        self.bucket = bucket_pixels.ExportPixels(session, settings, owner_id, listed=listed, feature=feature)

    def read(self, digest: str, *, max_bytes: int) -> bytes:
        chunks = self.bucket.chunks(digest)
        if chunks is None:
            with self.blobs.open(digest) as handle:
                data = handle.read(max_bytes + 1)
        else:
            data = _bounded(chunks, max_bytes)
        if len(data) > max_bytes:
            raise PayloadTooLarge(f"the image is larger than {max_bytes} bytes (LANNER_INFERENCE_MAX_BYTES)")
        return data


def _bounded(chunks: Iterator[bytes], max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of ``chunks``: enough to tell an image over the limit, never all of it."""
    buffer = bytearray()
    for chunk in chunks:
        buffer += chunk
        if len(buffer) > max_bytes:
            break
    return bytes(buffer[:max_bytes + 1])


def class_map(mapping: Sequence[int | None] | None, *, model_names: Sequence[str],
              dataset_names: Sequence[str]) -> list[int | None] | None:
    """The dataset class of each model class (None: dropped). Given, it must have one entry per model class and
    name classes the dataset has; not given, classes map by name (case-insensitive) when the dataset names any,
    else keep their numbers (None is returned: identity)."""
    if mapping is not None:
        if len(mapping) != len(model_names):
            raise Unprocessable(f"classMapping has {len(mapping)} entries; the model has {len(model_names)} classes "
                                "(one entry each: a dataset class index, or null to drop it)")
        if dataset_names:
            for index, target in enumerate(mapping):
                if target is not None and target >= len(dataset_names):
                    raise Unprocessable(f"classMapping[{index}]: the dataset has no class {target} (it has "
                                        f"{len(dataset_names)})")
        return list(mapping)
    if not dataset_names:
        return None
    by_name = {str(name).strip().lower(): index for index, name in enumerate(dataset_names)}
    return [by_name.get(str(name).strip().lower()) for name in model_names]
