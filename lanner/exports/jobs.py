"""The export job's states and the only ways they change (guarded compare-and-sets through ``lanner.status``,
each writing a ``StatusEvent``). The statuses are the SDK's:

    (requested) ──> queued
    queued ──> starting              the queue launched a worker through the executor (attempt n)
    starting ──> running             the executor says the worker runs
    starting | running ──> completed the worker's artefact arrived on the attempt's upload slot (a bucket's
                                     presigned slot: read back and hashed once the worker exited, ``exports.queue``)
    starting | running ──> queued    the worker was lost (killed, its node or server died): run it again, at most
                                     MAX_ATTEMPTS times
    queued | starting | running ──> failed     the export failed (its error kept), timed out or was lost too often
    queued | starting | running ──> cancelled  the owner deleted it while active; the queue stops its worker

``external_id`` is set while a worker may be alive (the queue clears it once the executor says it is gone), so
a cancelled or failed job whose worker still runs is found and stopped. A job that ends lets go of the weights
(``source_sha256``); a completed one holds its artefact (``sha256``) until it is deleted.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from lanner.db import utcnow
from lanner.errors import Conflict, NotFound
from lanner.exports.models import ModelExport
from lanner.status import try_change_status
from lanner.training.executors import job_states

# the shared statuses (``job_states``): the SDK's, said jobs.QUEUED by the callers
QUEUED, STARTING, RUNNING, COMPLETED, FAILED, CANCELLED = job_states.STATUSES
ACTIVE, LAUNCHED, MAX_ATTEMPTS = job_states.ACTIVE, job_states.LAUNCHED, job_states.MAX_ATTEMPTS

SLOT_PREFIX = "exports/"  # upload slot keys: exports/<export id>/<attempt token>/<file name>

# a job that ends lets go of the weights it exported
STATES = job_states.JobStates("export", ended={"source_sha256": None}, stamp_failure=True)
create, new_attempt, launched = STATES.create, STATES.new_attempt, STATES.launched
running, fail, lost = STATES.running, STATES.fail, STATES.lost


def cancel(session: Session, job: ModelExport) -> bool:
    return try_change_status(session, job, CANCELLED, allowed_from=ACTIVE, reason="cancelled by its owner",
                             completed_at=utcnow(), source_sha256=None)


def slot_key(job: ModelExport) -> str:
    """The attempt's upload slot: the key of its signed PUT on Lanner's route, or under a bucket's staging area."""
    return f"{SLOT_PREFIX}{job.id}/{job.slot}/{job.filename}"


def _slot_job(session: Session, key: str) -> ModelExport:
    parts = key.split("/")
    if len(parts) != 4 or not parts[0] + "/" == SLOT_PREFIX:
        raise NotFound("upload slot not found")
    job = session.get(ModelExport, parts[1])
    if job is None or job.slot is None or job.slot != parts[2]:
        raise NotFound("upload slot not found")
    if job.status not in LAUNCHED or job.sha256 is not None:
        raise Conflict(f"this export is {job.status}: its upload slot is closed")
    return job


def open_slot(session: Session, key: str) -> None:
    """Before the worker's signed PUT stores a byte: its attempt is the job's current one and still running."""
    _slot_job(session, key)


def record_artefact(session: Session, key: str, *, sha256: str, size: int) -> None:
    """The artefact arrived on the attempt's slot (streamed through Lanner's route, or settled from the bucket's
    staging area): the job is completed, in the same transaction."""
    job = _slot_job(session, key)
    if not try_change_status(session, job, COMPLETED, allowed_from=LAUNCHED, reason=f"{size} bytes",
                             sha256=sha256, size=size, completed_at=utcnow(), source_sha256=None,
                             started_at=job.started_at or utcnow()):
        raise Conflict(f"this export is {job.status}: its upload slot is closed")
