"""Which blobs something still refers to, and deleting those nothing does.

Blobs are content-addressed and shared (two models may hold the same weights, a dataset image may be in many
datasets), so a blob is deleted only when no row anywhere refers to it *and* nobody wrote it for a grace period
(every write, a deduplicated one too, refreshes its write time; an import refreshes its images just before it
references them). ``BLOB_REFERENCES`` names every column that holds a blob digest.

The columns are named, not imported: the tables that hold digests belong to the domains above storage
(datasets, projects, training, exports, deployments), and importing their models here would point imports up
the layers. Names also beat each domain registering its columns when its models are imported: a registry is
only as complete as the imports of the process that asks, and a process that had not imported one domain would
find that domain's blobs unreferenced and delete them. A list of names is complete wherever it is read; a test
fails when a table gains a digest column not listed here, and the query fails on a name that no longer exists.

Who asks: the signed download route and shared inference's signed links (``is_referenced``: only bytes
something refers to are served), the routes that let blobs go (``collect_after_commit``: purging the trash,
deleting an export), and the collector (``maintenance.gc``: superseded checkpoints and the sweep of the store).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from sqlalchemy import String, column, select, table, union
from sqlalchemy.orm import Session

from lanner.context import AppContext
from lanner.db import after_commit
from lanner.storage.blobs import BlobStore

log = logging.getLogger(__name__)

BLOB_REFERENCES: tuple[tuple[str, str], ...] = (  # (table, column)
    ("image_blobs", "sha256"),
    ("image_blobs", "thumb_sha256"),
    ("dataset_items", "sha256"),
    ("dataset_exports", "sha256"),
    ("models", "weights_sha256"),
    ("upload_sessions", "sha256"),
    ("staged_uploads", "sha256"),
    ("import_jobs", "source_sha256"),
    ("model_exports", "source_sha256"),
    ("autolabel_jobs", "weights_sha256"),  # the weights a run's worker may still fetch
    ("model_exports", "sha256"),
    ("deployments", "weights_sha256"),
    ("deployments", "artefact_sha256"),
)
_COLUMNS = tuple(table(name, column(digest, String)).c[digest] for name, digest in BLOB_REFERENCES)
# Digests per reference query: one bound value per digest and column, far under SQLite's and PostgreSQL's limits.
REFERENCE_CHUNK = 500


def referenced_among(session: Session, digests: Iterable[str]) -> set[str]:
    """Which of ``digests`` some row refers to. One query per chunk: a ``UNION`` of one indexed ``IN`` per
    column of ``BLOB_REFERENCES``, so asking costs a round trip per 500 digests whatever the number of tables
    (the signed download route asks for one digest per request, the sweep for thousands per pass)."""
    ordered = sorted(set(digests))
    found: set[str] = set()
    for start in range(0, len(ordered), REFERENCE_CHUNK):
        chunk = ordered[start:start + REFERENCE_CHUNK]
        found.update(session.scalars(union(*(select(digest.label("sha256")).where(digest.in_(chunk))
                                             for digest in _COLUMNS))))
    return found


def is_referenced(session: Session, sha256: str) -> bool:
    """Whether a row still refers to ``sha256`` (signed links serve only such bytes)."""
    return bool(referenced_among(session, [sha256]))


def delete_unreferenced(db: Any, blobs: BlobStore, digests: dict[str, int] | set[str], grace_seconds: float
                        ) -> dict[str, int]:
    """Delete those of ``digests`` that nothing refers to and nobody wrote for ``grace_seconds``."""
    sizes = digests if isinstance(digests, dict) else dict.fromkeys(digests, 0)
    ordered = sorted(sizes)
    with db.session() as session:
        live = referenced_among(session, ordered)
    deleted = freed = 0
    for sha256 in ordered:
        if sha256 not in live and blobs.delete_if_idle(sha256, grace_seconds):
            deleted, freed = deleted + 1, freed + sizes[sha256]
    return {"blobs": deleted, "bytes": freed}


def collect_after_commit(session: Session, ctx: AppContext, digests: set[str]) -> None:
    """Once ``session`` commits (a purge, a deleted export), delete those of ``digests`` nothing refers to any
    more. A failure here loses nothing: the collector's sweep finds the same blobs later."""
    def collect() -> None:
        try:
            delete_unreferenced(ctx.db, ctx.blobs, digests, ctx.settings.blob_grace_seconds)
        except Exception:
            log.exception("deleting the blobs of a purge failed; the sweep will find them")

    if digests:
        after_commit(session, collect)
