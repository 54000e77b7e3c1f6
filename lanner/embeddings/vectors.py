"""The vectors: which images of a dataset still lack one (the worker's manifest), storing a page the worker
delivers, a job's progress, a dataset's vectors for its index, and the copy-detection head of a vector key
(``embeddings.head``: whether a job should train one, storing the one it delivers, reading it back).

Vectors are keyed by (model digest, image sha256) (``ImageEmbedding``), float32 bytes, L2-normalised."""

from __future__ import annotations

import io
import re
import threading
from typing import Any

import numpy as np
from sqlalchemy import and_, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lanner.datasets.models import Dataset, DatasetItem
from lanner.embeddings import head
from lanner.embeddings.models import EmbeddingHead, EmbeddingJob, ImageEmbedding
from lanner.errors import BadRequest, NotFound

Head = tuple[str, dict[str, np.ndarray]]  # (digest, arrays)

SHA256 = re.compile(r"^[0-9a-f]{64}$")
MAX_PAGE = 1024
MAX_DIM = 4096


def _dataset(session: Session, job: EmbeddingJob) -> Dataset:
    dataset = session.get(Dataset, job.dataset_id)
    if dataset is None or dataset.deleted_at is not None:
        raise NotFound("the job's dataset is gone")
    return dataset


def missing_page(session: Session, job: EmbeddingJob, *, after: str, limit: int) -> list[str]:
    """Up to ``limit`` image digests of the job's dataset, in order after ``after``, without a vector yet."""
    dataset = _dataset(session, job)
    known = and_(ImageEmbedding.model_sha256 == job.model_sha256, ImageEmbedding.image_sha256 == DatasetItem.sha256)
    query = (select(DatasetItem.sha256).outerjoin(ImageEmbedding, known)
             .where(DatasetItem.manifest_id == dataset.manifest_id, ImageEmbedding.image_sha256.is_(None),
                    DatasetItem.sha256 > after)
             .group_by(DatasetItem.sha256).order_by(DatasetItem.sha256).limit(min(max(limit, 1), MAX_PAGE)))
    return list(session.scalars(query))


def store_page(session: Session, job: EmbeddingJob, payload: bytes) -> int:
    """Keep the vectors of one delivered page (``worker.pack``); returns how many were new. Only images of the
    job's dataset are taken, each once (an attempt that redelivers a page after a crash changes nothing)."""
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            hashes = [h.decode("ascii") for h in npz["sha256"].tolist()]
            matrix = np.asarray(npz["vectors"], dtype=np.float32)
            failed = [int(n) for n in npz["failed"].tolist()]
    except (ValueError, KeyError, OSError, UnicodeDecodeError) as exc:
        raise BadRequest(f"not a page of vectors: {type(exc).__name__}") from None
    if (matrix.ndim != 2 or matrix.shape[0] != len(hashes) or len(hashes) > MAX_PAGE or len(failed) != 2
            or (hashes and not 0 < matrix.shape[1] <= MAX_DIM) or not np.isfinite(matrix).all()
            or not all(SHA256.match(h) for h in hashes) or min(failed, default=0) < 0):
        raise BadRequest("a page of vectors has sha256 (n), vectors (n x dim, finite) and failed (2 counts)")
    dataset = _dataset(session, job)
    wanted = set(hashes)
    held = set(session.scalars(select(DatasetItem.sha256).where(DatasetItem.manifest_id == dataset.manifest_id,
                                                                DatasetItem.sha256.in_(wanted))))
    done = set(session.scalars(select(ImageEmbedding.image_sha256).where(
        ImageEmbedding.model_sha256 == job.model_sha256, ImageEmbedding.image_sha256.in_(wanted))))
    added = 0
    for sha, vector in zip(hashes, matrix, strict=True):
        if sha in held and sha not in done:
            session.add(ImageEmbedding(model_sha256=job.model_sha256, image_sha256=sha, dim=int(vector.shape[0]),
                                       vector=vector.tobytes()))
            done.add(sha)
            added += 1
    job.failed_downloads += failed[0]
    job.failed_inference += failed[1]
    job.processed += added
    session.flush()
    return added


def count_progress(session: Session, job: EmbeddingJob) -> None:
    """``total`` and ``processed`` as the dataset is now (images may have come or gone since the job began)."""
    dataset = _dataset(session, job)
    job.total = image_count(session, dataset)
    job.processed = embedded_count(session, dataset, job.model_sha256)


def image_count(session: Session, dataset: Dataset) -> int:
    """Distinct images (by digest) of ``dataset``."""
    hashes = select(DatasetItem.sha256).where(DatasetItem.manifest_id == dataset.manifest_id).distinct().subquery()
    return int(session.scalar(select(func.count()).select_from(hashes)) or 0)


def embedded_count(session: Session, dataset: Dataset, model_sha256: str) -> int:
    """Distinct images of ``dataset`` that have a vector under ``model_sha256``."""
    return int(session.scalar(
        select(func.count(func.distinct(DatasetItem.sha256)))
        .join(ImageEmbedding, and_(ImageEmbedding.image_sha256 == DatasetItem.sha256,
                                   ImageEmbedding.model_sha256 == model_sha256))
        .where(DatasetItem.manifest_id == dataset.manifest_id)) or 0)


def dataset_vectors(session: Session, manifest_id: int, model_sha256: str) -> tuple[list[str], np.ndarray]:
    """Every distinct image of a manifest with a vector under ``model_sha256``: (digests, n x dim matrix)."""
    rows = session.execute(
        select(ImageEmbedding.image_sha256, ImageEmbedding.vector)
        .where(ImageEmbedding.model_sha256 == model_sha256,
               ImageEmbedding.image_sha256.in_(select(DatasetItem.sha256)
                                               .where(DatasetItem.manifest_id == manifest_id)))
        .order_by(ImageEmbedding.image_sha256)).all()
    if not rows:
        return [], np.zeros((0, 0), np.float32)
    return [sha for sha, _ in rows], np.stack([np.frombuffer(blob, np.float32) for _, blob in rows])


def dataset_hashes(session: Session, manifest_id: int, model_sha256: str) -> list[str]:
    """The digests ``dataset_vectors`` would answer, in the same order, without reading a vector."""
    return list(session.scalars(
        select(ImageEmbedding.image_sha256)
        .where(ImageEmbedding.model_sha256 == model_sha256,
               ImageEmbedding.image_sha256.in_(select(DatasetItem.sha256)
                                               .where(DatasetItem.manifest_id == manifest_id)))
        .order_by(ImageEmbedding.image_sha256)))


def vectors_of(session: Session, model_sha256: str, hashes: list[str]) -> dict[str, np.ndarray]:
    """The vectors of some images under one model (those that have one)."""
    if not hashes:
        return {}
    rows: Any = session.execute(select(ImageEmbedding.image_sha256, ImageEmbedding.vector).where(
        ImageEmbedding.model_sha256 == model_sha256, ImageEmbedding.image_sha256.in_(hashes)))
    return {sha: np.frombuffer(blob, np.float32) for sha, blob in rows}


def sample(session: Session, job: EmbeddingJob, limit: int) -> list[str]:
    """Up to ``limit`` (at most ``head.IMAGES``) distinct image digests of the job's dataset, the first in sha256
    order: a sample as good as a random one (digests are), the same on every attempt."""
    dataset = _dataset(session, job)
    return list(session.scalars(select(DatasetItem.sha256).where(DatasetItem.manifest_id == dataset.manifest_id)
                                .group_by(DatasetItem.sha256).order_by(DatasetItem.sha256)
                                .limit(min(max(limit, 1), head.IMAGES))))


def wants_head(session: Session, job: EmbeddingJob, min_images: int) -> bool:
    """Whether the job's worker should train its vector key's head: the key has none yet, and the dataset holds
    at least ``min_images`` images (fewer teach a network nothing it can use on other images)."""
    if session.get(EmbeddingHead, job.model_sha256) is not None:
        return False
    return image_count(session, _dataset(session, job)) >= min_images


def store_head(session: Session, job: EmbeddingJob, payload: bytes) -> bool:
    """Keep the head the job's worker trained (``head.to_bytes``) as its vector key's, unless the key has one
    already (two jobs of a key trained one each: the first delivered stays, so indexes built with it stay
    right). Returns whether it was kept."""
    try:
        arrays = head.from_bytes(payload)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    sample_vector = session.scalar(select(ImageEmbedding.dim).where(ImageEmbedding.model_sha256 == job.model_sha256)
                                   .limit(1))
    if sample_vector is not None and arrays["mean"].shape[0] != sample_vector:
        raise BadRequest(f"the head takes vectors of {arrays['mean'].shape[0]} numbers; this key's have "
                         f"{sample_vector}")
    if session.get(EmbeddingHead, job.model_sha256) is not None:
        return False
    try:
        with session.begin_nested():  # another job of the key may store its head at the same moment
            session.add(EmbeddingHead(model_sha256=job.model_sha256, sha256=head.digest(payload),
                                      images=head.images_of(payload), data=payload))
    except IntegrityError:
        return False
    return True


_arrays: dict[str, dict[str, np.ndarray]] = {}  # head digest -> arrays: reading a head's 2.6 MB is paid once
_arrays_lock = threading.Lock()


def head_of(session: Session, model_sha256: str) -> Head | None:
    """The vector key's head, if one was trained: (its digest, its arrays). The digest is read each time (a
    primary-key lookup: the database, not this process, says which head a key has), the arrays once per digest."""
    digest = session.scalar(select(EmbeddingHead.sha256).where(EmbeddingHead.model_sha256 == model_sha256))
    if digest is None:
        return None
    with _arrays_lock:
        known = _arrays.get(digest)
    if known is None:
        known = head.from_bytes(session.scalar(select(EmbeddingHead.data)
                                               .where(EmbeddingHead.model_sha256 == model_sha256)))
        with _arrays_lock:
            _arrays[digest] = known
    return digest, known
