"""``datasets.health`` as stored: the checks (``checks``) run over a dataset's current manifest, the per-image
issue codes written into its items (what the image list's ``issue`` and ``hasError`` filters read) and the
summary kept on the dataset with the revision it describes (``health``, ``health_revision``).

Reading never writes: ``health_report`` (the health endpoint, the dataset page) returns the stored summary while
it describes the current revision, else computes one without storing it. A GET that writes takes the write lock
on SQLite, turns a crawler into load on the writer and cannot be served by a read replica. Storing happens
where content changes: an import's commit refreshes at once (``imports.ingest``); any other change (a label
saved, images deleted or moved, classes merged, a version restored) bumps the revision, and ``refresh_stale``,
run by the import queue's pass off the request path, catches up. A full check takes ~1.3 s for 100,000 images:
too slow to pay on every label save, and run outside any transaction here so it holds no lock meanwhile.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.orm import Session

from lanner.datasets import service
from lanner.datasets.health import checks
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.db import Database

STALE_PER_PASS = 5  # datasets refreshed per pass: the import queue's dispatch waits for them


def health_report(session: Session, dataset: Dataset) -> dict[str, Any]:
    """``datasets.health``: the stored report while the content is unchanged, else a fresh one, not stored."""
    summary = dataset.health
    if summary is None or dataset.health_revision != dataset.revision:
        summary = _check(session, dataset)[1].summary
    return {"dataset": dataset.slug, "revision": dataset.revision, **summary}


def refresh_health(session: Session, dataset: Dataset) -> dict[str, Any]:
    """Run the health checks over the current manifest; store per-image issue codes and the summary, in the
    caller's transaction (an import's commit)."""
    rows, report = _check(session, dataset)
    _store(session, dataset, rows, report)
    return report.summary


def refresh_stale(db: Database, limit: int = STALE_PER_PASS) -> int:
    """Store a fresh report for up to ``limit`` datasets whose content changed since theirs (not while an import
    runs: its commit refreshes). Each is read in one transaction, checked with none open, and stored in a
    second only if its revision did not move meanwhile (else the next pass tries again). Returns how many."""
    with db.session() as session:
        stale = list(session.scalars(select(Dataset.id).where(
            Dataset.deleted_at.is_(None), Dataset.status != "processing",
            or_(Dataset.health_revision.is_(None), Dataset.health_revision != Dataset.revision)).limit(limit)))
    stored = 0
    for dataset_id in stale:
        with db.session() as session:
            dataset = session.get(Dataset, dataset_id)
            if dataset is None:
                continue
            revision, rows = dataset.revision, _rows(session, dataset)
        report = _report(dataset, rows)
        with db.session() as session:  # the row locked (PostgreSQL): an import committing meanwhile is seen
            dataset = session.get(Dataset, dataset_id, with_for_update=True)
            if dataset is not None and dataset.revision == revision and dataset.status != "processing":
                _store(session, dataset, rows, report)
                stored += 1
    return stored


def _rows(session: Session, dataset: Dataset) -> list[Any]:
    return session.execute(select(DatasetItem.key, DatasetItem.name, DatasetItem.split,
                                  DatasetItem.sha256, DatasetItem.labels, DatasetItem.class_id, DatasetItem.issues,
                                  ImageBlob.phash, ImageBlob.width, ImageBlob.height)
                           .join(ImageBlob, ImageBlob.sha256 == DatasetItem.sha256)
                           .where(DatasetItem.manifest_id == dataset.manifest_id)).all()


def _report(dataset: Dataset, rows: list[Any]) -> checks.HealthReport:
    records = [checks.HealthImage(
        id=f"{dataset.id}-{r.key}", name=r.name, split=r.split, sha256=r.sha256,
        phash=(r.phash + (1 << 64)) if r.phash is not None and r.phash < 0 else r.phash,
        width=r.width, height=r.height, corrupt=None,
        labels=service.labels_to_records(r.labels), class_id=r.class_id) for r in rows]
    return checks.check_dataset(records, dataset.task, list(dataset.class_names or []))


def _check(session: Session, dataset: Dataset) -> tuple[list[Any], checks.HealthReport]:
    rows = _rows(session, dataset)
    return rows, _report(dataset, rows)


def _store(session: Session, dataset: Dataset, rows: list[Any], report: checks.HealthReport) -> None:
    changed = []
    for r in rows:
        codes = "," + "".join(f"{c}," for c in sorted(set(report.issues.get(f"{dataset.id}-{r.key}", []))))
        if codes != r.issues:
            changed.append({"b_key": r.key, "b_issues": codes})
    # Issue codes are a function of content, task and classes. A shared manifest (clone, version) has the same
    # content, and any change makes it private first, so codes are only written into a private manifest.
    if changed and not service.manifest_is_shared(session, dataset.manifest_id, dataset_id=dataset.id):
        table = DatasetItem.__table__
        session.execute(update(table).where(table.c.manifest_id == dataset.manifest_id,
                                            table.c.key == bindparam("b_key")).values(issues=bindparam("b_issues")),
                        changed)
    dataset.health = report.summary
    dataset.health_revision = dataset.revision
