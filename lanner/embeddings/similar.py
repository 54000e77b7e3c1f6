"""Similar images: ``images.find_similar_images`` and ``models.find_similar_training_images``.

A query searches the datasets the caller may read (theirs, their teams', public ones: the scope the SDK's
``find_similar_images`` documents) that were analysed with the same model digest as the query's vector, one
faiss index per dataset (``embeddings.index``), and merges the answers by cosine similarity. It searches at most
``MAX_DATASETS`` of them (``bounded``): the caller's own first, then their teams', then public ones, the most
recently updated first within each, so a server with many public datasets answers as fast as one with few.
Copies of the query image (the same bytes) are never answered; by default neither
is the query's own dataset nor any dataset holding a copy of it (``includeSourceDataset`` brings them back).
An image with no vector yet is a 409 that says to analyse its dataset: the server does not run a model inside a
request."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from sqlalchemy import case, or_, select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.context import AppContext
from lanner.datasets import items as dataset_items
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.embeddings import index, jobs, schemas, vectors
from lanner.embeddings.encoding import vector_key
from lanner.embeddings.models import EmbeddingJob
from lanner.embeddings.service import latest_analysis
from lanner.errors import BadRequest, Conflict
from lanner.projects import service as projects_service
from lanner.teams import permissions
from lanner.training import refs

LIMIT = 20
MAX_DATASETS = 24  # searched by one query (``bounded``)
Hit = tuple[float, Dataset, Any]  # (score, dataset, item row: key, name, sha256, width, height, thumb_sha256)


def searchable(session: Session, principal: Principal, model_sha256: str) -> list[Dataset]:
    """Datasets the caller may read that have a completed analysis under ``model_sha256``, in the order a query
    searches them (``bounded``): the caller's own, then their teams', then public ones; within each, the most
    recently updated first."""
    analysed = select(EmbeddingJob.dataset_id).where(EmbeddingJob.model_sha256 == model_sha256,
                                                     EmbeddingJob.status == jobs.COMPLETED)
    teams = permissions.team_ids(principal.user_id)
    readable = or_(Dataset.owner_id == principal.user_id, Dataset.visibility == "public", Dataset.owner_id.in_(teams))
    whose = case((Dataset.owner_id == principal.user_id, 0), (Dataset.owner_id.in_(teams), 1), else_=2)
    return list(session.scalars(select(Dataset).where(Dataset.id.in_(analysed), Dataset.deleted_at.is_(None),
                                                      readable)
                                .order_by(whose, Dataset.updated_at.desc(), Dataset.id)))


def bounded(datasets: list[Dataset]) -> list[Dataset]:
    """The first ``MAX_DATASETS`` of ``searchable``'s order: what one query searches. Each dataset is one index
    search (about a millisecond under HNSW, a few under the exact index) plus one SQL query for its answers, so
    a query costs at most ~``MAX_DATASETS`` of those; with ``embedding_index_cache_mb`` (2 GiB: eight 100,000 x
    512 indexes, or a hundred 10,000-image ones) their indexes stay in memory between queries."""
    return datasets[:MAX_DATASETS]


def holding(session: Session, datasets: Iterable[Dataset], sha256: str) -> set[str]:
    """The ids of those datasets that hold an image with these bytes."""
    by_manifest = {d.manifest_id: d.id for d in datasets}
    if not by_manifest:
        return set()
    return {by_manifest[m] for m in session.scalars(select(DatasetItem.manifest_id).where(
        by_digest(DatasetItem.manifest_id).in_(by_manifest), DatasetItem.sha256 == sha256).distinct())}


def by_digest(manifest_id: Any) -> Any:
    """``manifest_id`` as an expression no index serves, beside a condition on a few digests: the digests' index
    then finds the rows. Given the column, SQLite (no statistics) walks the manifest's index instead, every item
    of the dataset (100,000 rows: 30-40 ms a query), to save sorting 20."""
    return manifest_id + 0


def search(session: Session, ctx: AppContext, datasets: list[Dataset], model_sha256: str, query: np.ndarray, *,
           k: int, skip_hashes: set[str]) -> list[Hit]:
    """The ``k`` best images of ``datasets`` for ``query``, without ``skip_hashes``, best first."""
    hits: list[Hit] = []
    mapped: dict[int, np.ndarray] = {}  # the query through each head met (datasets of one key share theirs)
    where = index.space(session, model_sha256)  # the key's head, read once for all its datasets
    for dataset in datasets:
        wanted = k + min(len(skip_hashes), 4 * k)  # room for skipped answers, never a whole training set's
        searched = index.load(session, ctx, dataset, model_sha256, where=where)
        if id(searched.head) not in mapped:
            mapped[id(searched.head)] = searched.mapped(query)
        found = [(sha, score) for sha, score in searched.search(query, wanted, mapped=mapped[id(searched.head)])
                 if sha not in skip_hashes][:k]
        if not found:
            continue
        scores = dict(found)
        rows = session.execute(
            select(DatasetItem.key, DatasetItem.name, DatasetItem.sha256, ImageBlob.width, ImageBlob.height,
                   ImageBlob.thumb_sha256).join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
            .where(by_digest(DatasetItem.manifest_id) == dataset.manifest_id, DatasetItem.sha256.in_(scores))
            .order_by(DatasetItem.name, DatasetItem.key)).all()
        seen: set[str] = set()
        for row in rows:
            if row.sha256 not in seen:  # one item per image: the same bytes twice in a dataset are one answer
                seen.add(row.sha256)
                hits.append((scores[row.sha256], dataset, row))
    hits.sort(key=lambda hit: -hit[0])
    return hits[:k]


def answer(session: Session, ctx: AppContext, hits: list[Hit]) -> dict[str, Any]:
    """``{images: [...]}`` in the SDK's ``ImagesFindSimilarImagesResponse`` shape."""
    owners = {d.owner_id: datasets_service.owner_name(session, d) for _, d, _ in hits}
    return schemas.similar_images(hits, owners, ctx.signer.blob_links())


def similar_images(session: Session, principal: Principal, ctx: AppContext, image_id: str, *,
                   include_source: bool) -> dict[str, Any]:
    dataset, item = dataset_items.resolve_image(session, principal, image_id)
    done = latest_analysis(session, dataset)
    if done is None:
        raise Conflict("this image's dataset has no embeddings yet: analyse it first (datasets.create_embeddings)",
                       code="no_embeddings")
    query = vectors.vectors_of(session, done.model_sha256, [item.sha256]).get(item.sha256)
    if query is None:
        raise Conflict("this image came after the dataset's last analysis: analyse it again "
                       "(datasets.create_embeddings embeds only the new images)", code="no_embeddings")
    datasets = searchable(session, principal, done.model_sha256)
    if not include_source:
        skip = holding(session, datasets, item.sha256) | {dataset.id}
        datasets = [d for d in datasets if d.id not in skip]
    hits = search(session, ctx, bounded(datasets), done.model_sha256, query, k=LIMIT, skip_hashes={item.sha256})
    return answer(session, ctx, hits)


def _training_dataset(session: Session, principal: Principal, train_args: dict[str, Any] | None) -> Dataset | None:
    parts = refs.dataset_parts(str((train_args or {}).get("data") or ""))
    if parts is None:
        return None
    try:
        return datasets_service.get_dataset(session, principal, owner=parts[0], slug=parts[1])
    except Exception:  # gone, or no longer the caller's to read: nothing to exclude
        return None


def similar_training_images(session: Session, principal: Principal, ctx: AppContext, *, owner: str, project: str,
                            model: str, hashes: str | None) -> dict[str, Any]:
    """Images like the ones the run scored worst on, drawn from each one's nearest neighbours in turn, without
    images its training dataset already holds. Lanner's runs record no per-image results, so the cohort is the
    ``hashes`` the caller names (empty without them, as the SDK documents for such a run)."""
    record = projects_service.get_model(session, principal, owner=owner, project=project, model=model)
    cohort = [h.strip().lower() for h in (hashes or "").split(",") if h.strip()]
    if any(not vectors.SHA256.match(h) for h in cohort) or len(cohort) > 100:
        raise BadRequest("hashes are up to 100 comma-separated image sha256 digests")
    if not cohort:
        return {"images": []}
    trained = _training_dataset(session, principal, record.train_args)
    analysis = latest_analysis(session, trained) if trained is not None else None
    digests = [d for d in (analysis.model_sha256 if analysis else None,
                            vector_key(record.weights_sha256) if record.weights_sha256 else None) if d]
    for digest in digests:
        queries = vectors.vectors_of(session, digest, cohort)
        if queries:
            break
    else:
        return {"images": []}
    datasets = bounded([d for d in searchable(session, principal, digest) if trained is None or d.id != trained.id])
    skip = set(cohort)
    if trained is not None:
        skip |= set(session.scalars(select(DatasetItem.sha256).where(DatasetItem.manifest_id == trained.manifest_id)))
    per_query = [search(session, ctx, datasets, digest, queries[h], k=LIMIT, skip_hashes=skip)
                 for h in cohort if h in queries]
    merged: list[Hit] = []
    seen: set[str] = set()
    for rank in range(LIMIT):  # each worst image's nearest neighbours in turn
        for hits in per_query:
            if rank < len(hits) and hits[rank][2].sha256 not in seen and len(merged) < LIMIT:
                seen.add(hits[rank][2].sha256)
                merged.append(hits[rank])
    return answer(session, ctx, merged)
