"""A deployment's states and the only ways they change: guarded compare-and-sets through ``lanner.status``
(each writes a ``StatusEvent``), each also written to the deployment's log with its reason. The statuses are
the SDK's; the edges are the hosted platform's (docs: deploy/endpoints.md), plus the restart of a crashed
process:

    (created) ──> creating
    creating ──> deploying             the process (or Ray Serve application) was launched
    deploying ──> ready                it answers its health check
    ready ──> deploying                it crashed (restarted after a backoff), or a replace/resize rolls it out
    creating | deploying ──> failed    it cannot be served (the weights do not load), or kept crashing
    creating | deploying | ready ──> stopping   the owner stopped (or deleted) it, or the credit ran out
    stopping ──> stopped               its process is gone
    stopped | failed ──> deploying     the owner started it again

``status_message`` says why the deployment is where it is (the crash and the restart to come, the load error,
"serving with ONNX Runtime"); the log keeps every step.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lanner.db import utcnow
from lanner.deployments.models import Deployment, DeploymentLog
from lanner.status import record_created, try_change_status

CREATING = "creating"
DEPLOYING = "deploying"
READY = "ready"
STOPPING = "stopping"
STOPPED = "stopped"
FAILED = "failed"
STATUSES = (CREATING, DEPLOYING, READY, STOPPING, STOPPED, FAILED)
RUNNING = (CREATING, DEPLOYING, READY)  # a process should exist
STARTABLE = (STOPPED, FAILED)

ALLOWED: dict[str, tuple[str, ...]] = {
    DEPLOYING: (CREATING, READY, STOPPED, FAILED),
    READY: (DEPLOYING,),
    FAILED: (CREATING, DEPLOYING),
    STOPPING: (CREATING, DEPLOYING, READY),
    STOPPED: (STOPPING,),
}
SEVERITY = {DEPLOYING: "INFO", READY: "NOTICE", FAILED: "ERROR", STOPPING: "INFO", STOPPED: "INFO"}


def log(session: Session, deployment_id: str, message: str, *, severity: str = "INFO",
        at: datetime | None = None) -> None:
    """A lifecycle line in the deployment's log."""
    session.add(DeploymentLog(deployment_id=deployment_id, severity=severity, message=message[:2000],
                              created_at=at or utcnow()))


def create(session: Session, deployment: Deployment, *, reason: str) -> Deployment:
    session.add(deployment)
    record_created(session, deployment, reason=reason)
    log(session, deployment.id, f"created: {reason}")
    return deployment


def transition(session: Session, deployment: Deployment, to: str, *, reason: str, severity: str | None = None,
               **values: Any) -> bool:
    """``deployment.status = to`` if its stored status allows it (``ALLOWED``), with ``status_message`` set to
    ``reason`` and ``values`` written in the same statement; False when another writer moved it first."""
    changed = try_change_status(session, deployment, to, allowed_from=ALLOWED[to], reason=reason[:300],
                                status_message=reason[:500], **values)
    if changed:
        log(session, deployment.id, f"{to}: {reason}", severity=severity or SEVERITY[to])
    return changed
