"""A dataset's status and the only ways it changes. Every change is a guarded compare-and-set through
``lanner.status`` that writes a ``StatusEvent``, so two imports can never run on one dataset at once, and an
import's end is recorded against the state it really started from.

    (created or cloned) ──> ready
    ready | failed ──> processing       an upload was accepted for import (POST .../ingest); queued as a job
    processing ──> ready                the queued import finished
    processing ──> failed               the queued import failed; ``processingError`` says why
    ready | failed ──> ready            a direct import (``lanner datasets import``, never queued) finished

A failed direct import leaves the status as it was: nothing was queued, and the dataset's content is unchanged.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from lanner.datasets.models import Dataset
from lanner.db import iso, utcnow
from lanner.errors import Conflict
from lanner.status import InvalidStatusChange, change_status, record_created, try_change_status

READY = "ready"
PROCESSING = "processing"
FAILED = "failed"

IMPORT_FROM = (READY, FAILED)


def created(session: Session, dataset: Dataset, *, reason: str | None = None) -> None:
    """A new dataset (created, or cloned) starts ready; flushes it and records its first event."""
    dataset.status = READY
    session.add(dataset)
    record_created(session, dataset, reason=reason)


def start_import(session: Session, dataset: Dataset) -> None:
    """ready | failed -> processing; a dataset already processing refuses a second import (409)."""
    try:
        change_status(session, dataset, PROCESSING, allowed_from=IMPORT_FROM, reason="import queued",
                      processing_error=None)
    except InvalidStatusChange:
        raise Conflict("this dataset is already processing an import") from None


def finish_import(session: Session, dataset: Dataset, *, queued: bool) -> None:
    """processing -> ready for a queued import, ready | failed -> ready for a direct one."""
    change_status(session, dataset, READY, allowed_from=(PROCESSING,) if queued else IMPORT_FROM,
                  reason="import finished", processing_error=None)


def fail_import(session: Session, dataset: Dataset, message: str) -> bool:
    """processing -> failed, with the reason as ``processingError``; False if it was no longer processing."""
    return try_change_status(session, dataset, FAILED, allowed_from=(PROCESSING,), reason=message[:300],
                             processing_error={"message": message, "timestamp": iso(utcnow())})
