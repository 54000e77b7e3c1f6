"""The states shared by every job a worker process runs through the executors (exports, auto-annotation,
embeddings) and the changes all of them make the same way: each one a guarded compare-and-set through
``lanner.status`` (so with its ``StatusEvent``). The statuses are the SDK's:

    (requested) ──> queued
    queued ──> starting              the queue launched a worker through the executor (attempt n)
    starting ──> running             the executor says the worker runs
    starting | running ──> queued    the worker was lost: run it again, at most MAX_ATTEMPTS times
    queued | starting | running ──> failed     the worker failed (its error kept) or was lost too often

How a job completes, and what it lets go of when it ends (the weights it held, its attempt's slot), is each
domain's: ``JobStates`` is given the columns an ended job clears, and the domain's ``jobs`` module keeps its
``complete`` and ``cancel``.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy.orm import Session

from lanner.db import utcnow
from lanner.status import record_created, try_change_status

QUEUED = "queued"
STARTING = "starting"
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
STATUSES = (QUEUED, STARTING, RUNNING, COMPLETED, FAILED, CANCELLED)
ACTIVE = (QUEUED, STARTING, RUNNING)
LAUNCHED = (STARTING, RUNNING)
MAX_ATTEMPTS = 3


class JobStates:
    """The changes of one table's jobs. ``what`` names its worker in a reason ("export"); ``ended`` are the
    columns a failed job clears; ``stamp_failure`` also sets ``failed_at`` where the table has one."""

    def __init__(self, what: str, *, ended: dict[str, Any], stamp_failure: bool = False) -> None:
        self.what = what
        self.ended = ended
        self.stamp_failure = stamp_failure

    def create(self, session: Session, job: Any, *, reason: str) -> Any:
        session.add(job)
        record_created(session, job, reason=reason)
        return job

    def new_attempt(self, job: Any) -> None:
        """Before launching: the next attempt number and a fresh token for its signed links or upload slot (an
        older attempt's delivery is refused)."""
        job.attempt += 1
        job.slot = secrets.token_hex(8)

    def launched(self, session: Session, job: Any, *, external_id: str, executor: str) -> bool:
        """queued -> starting, for the attempt the queue just launched (``job.attempt`` and ``job.slot`` set)."""
        return try_change_status(session, job, STARTING, allowed_from=(QUEUED,), reason=f"attempt {job.attempt}",
                                 external_id=external_id, executor=executor)

    def running(self, session: Session, job: Any) -> bool:
        return try_change_status(session, job, RUNNING, allowed_from=(STARTING,),
                                 started_at=job.started_at or utcnow())

    def fail(self, session: Session, job: Any, message: str) -> bool:
        now = utcnow()
        stamps = {"failed_at": now} if self.stamp_failure else {}
        return try_change_status(session, job, FAILED, allowed_from=ACTIVE, reason=message[:300],
                                 error=message[:4000], completed_at=now, **stamps, **self.ended)

    def lost(self, session: Session, job: Any, why: str) -> None:
        """The worker is gone without an outcome: run the job again, or fail it after MAX_ATTEMPTS."""
        if job.attempt >= MAX_ATTEMPTS:
            self.fail(session, job, f"the {self.what} worker was lost {job.attempt} times; last: {why}")
        else:
            try_change_status(session, job, QUEUED, allowed_from=LAUNCHED, reason=f"lost: {why}"[:300],
                              external_id=None, slot=None)
